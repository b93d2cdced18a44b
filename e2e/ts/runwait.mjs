// The run handle with the reference TypeScript SDK client at its default
// request timeout (60 s), which validates every structured result against
// the tool's outputSchema: a run past limits.answer_within_seconds answers
// running with its run_id, run_wait answers running again and then the
// result a plain call has; run_cancel stops a run and its box is gone.
//   node runwait.mjs /path/to/runbox MANIFEST [seconds]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { execFileSync } from "node:child_process";
import assert from "node:assert/strict";

const [bin, manifest, secondsArg] = process.argv.slice(2);
assert.ok(bin && manifest, "usage: node runwait.mjs BIN MANIFEST [seconds]");
const seconds = Number(secondsArg ?? 8);

const client = new Client({ name: "runbox-ts-runwait", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: bin, args: ["serve", "--manifest", manifest], stderr: "ignore" }));
const { tools } = await client.listTools();
for (const name of ["run_wait", "run_cancel"]) assert.ok(tools.some((t) => t.name === name), `${name} is listed`);
assert.match(tools.find((t) => t.name === "run_code").description, /run_wait/);

const call = (name, args) => client.callTool({ name, arguments: args });
const plain = await call("run_code", { language: "python", code: "print('plain')" });
assert.equal(plain.structuredContent.status, "ok", JSON.stringify(plain));

const code = `import time\nfor i in range(${seconds}):\n    print(i, flush=True)\n    time.sleep(1)\nprint("done")`;
const t0 = Date.now();
const first = await call("run_code", { language: "python", code, timeout_seconds: seconds + 60 });
const firstMs = Date.now() - t0;
assert.equal(first.structuredContent.status, "running", JSON.stringify(first));
assert.ok(!first.isError);
const id = first.structuredContent.run_id;
assert.match(first.content[0].text, /run_wait/, "the text names run_wait");
assert.ok(firstMs < seconds * 1000, `running came back before the run's end (${firstMs} ms)`);

let waits = 0, runningAgain = 0, done;
for (;;) {
  waits++;
  const w = await call("run_wait", { run_id: id });
  assert.equal(w.structuredContent.run_id, id);
  if (w.structuredContent.status !== "running") { done = w; break; }
  runningAgain++;
}
const totalMs = Date.now() - t0;
assert.equal(done.structuredContent.status, "ok", JSON.stringify(done));
assert.equal(done.structuredContent.stdout, [...Array(seconds).keys()].join("\n") + "\ndone\n");
assert.deepEqual(Object.keys(done.structuredContent).sort(), Object.keys(plain.structuredContent).sort(), "the same result shape as a plain call");
assert.deepEqual(done.content.map((c) => c.type), plain.content.map((c) => c.type));
assert.ok(runningAgain >= 1, "run_wait answered running at least once");

// run_cancel: the box of the run is gone soon after.
const long = await call("run_code", { language: "python", code: "import time\ntime.sleep(120)", timeout_seconds: 300 });
assert.equal(long.structuredContent.status, "running");
const longId = long.structuredContent.run_id;
const box = () => execFileSync("docker", ["ps", "-aq", "--filter", `label=io.runbox.run=${longId}`]).toString().trim();
assert.notEqual(box(), "", "the running run has a box");
const c0 = Date.now();
const cancelled = await call("run_cancel", { run_id: longId });
const cancelMs = Date.now() - c0;
assert.equal(cancelled.structuredContent.status, "error", JSON.stringify(cancelled));
assert.equal(cancelled.structuredContent.error.kind, "sandbox");
let goneMs = -1;
while (Date.now() - c0 < 30000) {
  if (box() === "") { goneMs = Date.now() - c0; break; }
  await new Promise((r) => setTimeout(r, 50));
}
assert.ok(goneMs >= 0, "the cancelled run's box is gone");
const after = await call("run_wait", { run_id: longId });
assert.equal(after.structuredContent.error.kind, "sandbox", "a cancelled run's result is kept");

const unknown = await call("run_wait", { run_id: "r_01AAAAAAAAAAAAAAAAAAAAAAAA" });
assert.equal(unknown.isError, true);
assert.equal(unknown.structuredContent.error.kind, "invalid_request");

await client.close();
console.log(`ts runwait: ${id} running after ${firstMs} ms, ${waits} run_wait calls (${runningAgain} running), result after ${totalMs} ms; ${longId} run_cancel answered in ${cancelMs} ms, box gone ${goneMs} ms after the cancel`);
