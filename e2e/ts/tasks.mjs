// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) with the
// reference TypeScript SDK client. SDK 1.32.2 knows only the 2025-11-25
// draft of tasks, so the calls go through its low-level request API with
// the extension's wire shapes: requests of protocol 2026-07-28 that
// declare the extension in their per-request capabilities.
//   node tasks.mjs /path/to/runbox [seconds]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResultSchema } from "@modelcontextprotocol/sdk/types.js";
import assert from "node:assert/strict";

const EXT = "io.modelcontextprotocol/tasks";
const [bin, secondsArg] = process.argv.slice(2);
assert.ok(bin, "usage: node tasks.mjs BIN [seconds]");
const seconds = Number(secondsArg ?? 10);

const client = new Client({ name: "runbox-ts-tasks", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: bin, args: ["serve"], stderr: "ignore" }));
assert.ok(client.getServerCapabilities().extensions?.[EXT], "the server declares the extension");

const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "runbox-ts-tasks", version: "1.0.0" },
  "io.modelcontextprotocol/clientCapabilities": { extensions: { [EXT]: {} } } };
// The SDK's default request timeout (60 s) applies to every request: no
// request here waits for the run.
const request = (method, params, m = meta) => client.request({ method, params: { ...params, _meta: m } }, ResultSchema);
const withoutTasks = { ...meta, "io.modelcontextprotocol/clientCapabilities": {} };

const code = `import time\nfor i in range(${seconds}):\n    print(i, flush=True)\n    time.sleep(1)\nprint("done")`;
const args = { language: "python", code, timeout_seconds: seconds + 60 };

// A plain call of a short program, of the same protocol but without the
// extension: the shape a task's result must have.
const plain = await request("tools/call", { name: "run_code", arguments: { language: "python", code: "print('plain')" } }, withoutTasks);
assert.notEqual(plain.resultType, "task", "no task for a client without the extension");
assert.equal(plain.structuredContent.status, "ok", JSON.stringify(plain));

const t0 = Date.now();
const created = await request("tools/call", { name: "run_code", arguments: args });
const answeredMs = Date.now() - t0;
assert.equal(created.resultType, "task", JSON.stringify(created));
assert.equal(created.status, "working");
assert.ok(created.taskId.length >= 22, created.taskId);
for (const k of ["createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"]) assert.ok(k in created, `CreateTaskResult has ${k}`);
assert.ok(answeredMs < seconds * 1000, `the task came back at once (${answeredMs} ms), not after the run`);

const statuses = [];
const messages = new Set();
let task;
for (;;) {
  task = await request("tasks/get", { taskId: created.taskId });
  assert.equal(task.resultType, "complete");
  if (statuses.at(-1) !== task.status) statuses.push(task.status);
  if (task.statusMessage) messages.add(task.statusMessage);
  if (["completed", "failed", "cancelled"].includes(task.status)) break;
  await new Promise((r) => setTimeout(r, task.pollIntervalMs ?? 1000));
}
const tookMs = Date.now() - t0;
assert.deepEqual(statuses, ["working", "completed"], JSON.stringify(task));
const result = task.result;
const shape = (r) => Object.keys(r).filter((k) => k !== "_meta").sort().join(",");
assert.equal(shape(result), shape(plain), "a task's result has a plain call's shape");
assert.equal(result.structuredContent.status, "ok", JSON.stringify(result));
assert.ok(result.structuredContent.stdout.endsWith(`${seconds - 1}\ndone\n`), result.structuredContent.stdout);
assert.ok([...messages].some((m) => /^running for \d+ s$/.test(m)), `progress reached the task: ${[...messages]}`);

// An id that is not this client's task: -32602.
await assert.rejects(request("tasks/get", { taskId: "A".repeat(26) }), (e) => e.code === -32602);
// tasks/result is the 2025-11-25 draft's, not the extension's.
await assert.rejects(request("tasks/result", { taskId: created.taskId }), (e) => e.code === -32601);

await client.close();
console.log(`ts tasks: a ${seconds} s run as a task: answered in ${answeredMs} ms, ${statuses.join(" -> ")} in ${(tookMs / 1000).toFixed(1)} s, result shaped as a plain call's, progress: ${[...messages].slice(-1)}`);
