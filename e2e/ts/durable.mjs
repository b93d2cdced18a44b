// A long run outlives its server, with the reference TypeScript SDK
// client at its default request timeout (60 s): the call asks for its
// answer within 2 s (_meta io.runbox/answer_within_seconds) and gets
// running; the server is killed (SIGKILL) mid-run; a new server on the
// same state directory answers run_wait running, then the run's whole
// result, shaped as a plain call's (the SDK checks it against the output
// schema).
//   node durable.mjs /path/to/runbox MANIFEST STATE_DIR [seconds [HOST]]
// With HOST, each server runs in a UTS namespace of its own under that
// host name (unshare), so that other runbox servers on the shared engine
// leave its boxes alone (e2e/durable_server_test.go's ownHost).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

const [bin, manifest, state, secondsArg, host] = process.argv.slice(2);
assert.ok(bin && manifest && state, "usage: node durable.mjs BIN MANIFEST STATE_DIR [seconds]");
const seconds = Number(secondsArg ?? 25);

const connect = async () => {
  const serve = ["serve", "--manifest", manifest];
  const transport = host
    ? new StdioClientTransport({ command: "unshare", args: ["--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, bin, ...serve], env: { XDG_STATE_HOME: state }, stderr: "inherit" })
    : new StdioClientTransport({ command: bin, args: serve, env: { XDG_STATE_HOME: state }, stderr: "inherit" });
  const client = new Client({ name: "runbox-ts-durable", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const a = await connect();
const code = `import time\nfor i in range(${seconds}):\n    print(i, flush=True)\n    time.sleep(1)\nprint("done")`;
const first = await a.client.callTool({ name: "run_code", arguments: { language: "python", code, timeout_seconds: seconds + 120 }, _meta: { "io.runbox/answer_within_seconds": 2 } });
assert.equal(first.structuredContent.status, "running", JSON.stringify(first));
const id = first.structuredContent.run_id;

// The record names the run's box once the job is sent.
const record = `${state}/runbox/runs/run-${id}.json`;
const t0 = Date.now();
for (;;) {
  let text = "";
  try { text = readFileSync(record, "utf8"); } catch {}
  if (text.includes("box_id")) break;
  assert.ok(Date.now() - t0 < 180000, `no record of ${id} with its box`);
  await sleep(100);
}
const pid = a.transport.pid;
process.kill(pid, "SIGKILL");
const killedAt = Date.now();
await a.client.close().catch(() => {});

const b = await connect();
const again = await b.client.callTool({ name: "run_wait", arguments: { run_id: id, wait_seconds: 0 } });
assert.equal(again.structuredContent.status, "running", JSON.stringify(again));
let waits = 0, done;
for (;;) {
  waits++;
  const w = await b.client.callTool({ name: "run_wait", arguments: { run_id: id } });
  assert.equal(w.structuredContent.run_id, id);
  if (w.structuredContent.status !== "running") { done = w; break; }
  assert.ok(Date.now() - killedAt < 300000, "the adopted run never ended");
}
assert.equal(done.structuredContent.status, "ok", JSON.stringify(done));
assert.equal(done.structuredContent.exit_code, 0);
assert.equal(done.structuredContent.stdout, [...Array(seconds).keys()].join("\n") + "\ndone\n");
await b.client.close();
console.log(`ts durable: ${id} running, server ${pid} killed, a new server answered running and then the result after ${waits} run_wait calls, ${Date.now() - killedAt} ms after the kill`);
