// The bench's task rows with the reference TypeScript SDK client: a short
// run_code (print(1)) as a plain call and, in the same run on the same
// server, as an MCP task (io.modelcontextprotocol/tasks, SEP-2663), polled
// with tasks/get every 10 ms and at the server's pollIntervalMs, as a
// client should. The calls alternate, so the three rows share the
// machine's state. Prints the calls' times as JSON; the Go bench makes the
// rows.
//   node tasks.mjs SDK_DIR RUNBOX MANIFEST N PACE_MS
// SDK_DIR is a folder whose node_modules has @modelcontextprotocol/sdk
// (e2e/ts after `npm ci`). SDK 1.32.2 knows only the 2025-11-25 draft of
// tasks, so the calls go through its low-level request API with the
// extension's wire shapes (as e2e/ts/tasks.mjs does).
import { createRequire } from "node:module";
import path from "node:path";

const EXT = "io.modelcontextprotocol/tasks";
const [sdkDir, bin, manifest, n, paceMs] = process.argv.slice(2);
const require = createRequire(path.resolve(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { ResultSchema } = require("@modelcontextprotocol/sdk/types.js");

const client = new Client({ name: "runbox-bench-ts", version: "1" });
await client.connect(new StdioClientTransport({ command: bin, args: ["serve", "--manifest", manifest], stderr: "ignore" }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const meta = (tasks) => ({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "runbox-bench-ts", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": tasks ? { extensions: { [EXT]: {} } } : {} });
const request = (method, params, tasks) => client.request({ method, params: { ...params, _meta: meta(tasks) } }, ResultSchema);
const call = { name: "run_code", arguments: { language: "python", code: "print(1)" } };

function ok(result) {
  if (result.isError || result.structuredContent?.status !== "ok" || result.structuredContent.stdout !== "1\n") {
    throw new Error("run_code failed: " + JSON.stringify(result).slice(0, 300));
  }
}

async function plain() {
  const r = await request("tools/call", call, false);
  if (r.resultType === "task") throw new Error("a task for a call without the extension");
  ok(r);
}

// task makes the call as a task and polls it every pollMs (undefined: the
// server's pollIntervalMs) until it ends.
async function task(pollMs) {
  const created = await request("tools/call", call, true);
  if (created.resultType !== "task") throw new Error("no task: " + JSON.stringify(created).slice(0, 300));
  for (;;) {
    await sleep(pollMs ?? created.pollIntervalMs ?? 1000);
    const t = await request("tasks/get", { taskId: created.taskId }, true);
    if (t.status === "completed") return ok(t.result);
    if (["failed", "cancelled"].includes(t.status)) throw new Error("task " + t.status + ": " + JSON.stringify(t).slice(0, 300));
  }
}

const kinds = { plain: () => plain(), task10: () => task(10), taskPoll: () => task(undefined) };
const ms = { plain: [], task10: [], taskPoll: [] };
try {
  if (!client.getServerCapabilities().extensions?.[EXT]) throw new Error("the server does not declare " + EXT);
  await sleep(6000); // the pool fills
  await plain(); // warm-up, not counted
  for (let i = 0; i < Number(n); i++) {
    for (const [k, f] of Object.entries(kinds)) {
      await sleep(Number(paceMs));
      const t = performance.now();
      await f();
      ms[k].push(performance.now() - t);
    }
  }
  console.log(JSON.stringify(ms));
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
}
await client.close();
