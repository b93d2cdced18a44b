// The bench's session-cell rows with the reference TypeScript SDK client:
// MCP ping, a no-op tool call (session_list) and a session cell print(1),
// interleaved round by round on one server, after tools/list (so the
// client validates structuredContent against the published outputSchema,
// as the SDK does for any tool it has listed). Then throughput: cells back
// to back in one session, and in 8 sessions at once, against no-op tool
// calls the same way, each for SECONDS. Prints the times as JSON; the Go
// bench makes the rows.
//   node cells.mjs SDK_DIR RUNBOX MANIFEST N SECONDS
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, bin, manifest, n, seconds] = process.argv.slice(2);
const require = createRequire(path.resolve(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { CallToolResultSchema } = require("@modelcontextprotocol/sdk/types.js");

const env = { ...process.env };
const client = new Client({ name: "runbox-bench-ts", version: "1" });
await client.connect(new StdioClientTransport({ command: bin, args: ["serve", "--manifest", manifest], stderr: "inherit", env }));

function check(r, want) {
  if (r.isError || r.structuredContent?.status !== "ok" || r.structuredContent.stdout !== want) {
    throw new Error("run_code failed: " + JSON.stringify(r).slice(0, 300));
  }
}
const open = async () => {
  const r = await client.callTool({ name: "session_open", arguments: { language: "python" } });
  if (r.isError) throw new Error("session_open: " + JSON.stringify(r).slice(0, 300));
  return r.structuredContent.session.session_id;
};
const cell = async (id) => check(await client.callTool({ name: "run_code", arguments: { language: "python", code: "print(1)", session_id: id } }), "1\n");
// raw is the same cell through the low-level request API: no output
// validation, what the client's validation costs is the difference.
const raw = async (id) => check(await client.request({ method: "tools/call", params: { name: "run_code", arguments: { language: "python", code: "print(1)", session_id: id } } }, CallToolResultSchema), "1\n");
const noop = async () => {
  const r = await client.callTool({ name: "session_list", arguments: {} });
  if (r.isError) throw new Error("session_list: " + JSON.stringify(r).slice(0, 300));
};
const ping = () => client.ping();

// rate runs f from k workers for secs seconds and counts the calls.
async function rate(k, secs, f) {
  const end = performance.now() + secs * 1000;
  let count = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: k }, (_, i) => (async () => {
    while (performance.now() < end) {
      await f(i);
      count++;
    }
  })()));
  return { calls: count, secs: (performance.now() - t0) / 1000 };
}

const out = {};
const ids = [];
try {
  await client.listTools();
  for (let i = 0; i < 8; i++) ids.push(await open());
  const id = ids[0];
  const kinds = { ping: () => ping(), noop: () => noop(), cell: () => cell(id), cellRaw: () => raw(id) };
  for (const f of Object.values(kinds)) await f(); // warm-up, not counted
  for (const k of Object.keys(kinds)) out[k] = [];
  for (let i = 0; i < Number(n); i++) {
    for (const [k, f] of Object.entries(kinds)) {
      const t = performance.now();
      await f();
      out[k].push(performance.now() - t);
    }
  }
  const secs = Number(seconds);
  out.rates = {};
  // In turns, the order reversed the second time: the machine's drift
  // weighs on both.
  const rates = { noop1: [1, noop], cell1: [1, () => cell(id)], noop8: [8, noop], cell8: [8, (i) => cell(ids[i])] };
  const order = Object.keys(rates);
  for (const turn of [order, [...order].reverse()]) {
    for (const k of turn) {
      const [w, f] = rates[k];
      const r = await rate(w, secs / 2, f);
      const o = (out.rates[k] ??= { calls: 0, secs: 0 });
      o.calls += r.calls;
      o.secs += r.secs;
    }
  }
} catch (e) {
  out.error = String(e);
}
for (const id of ids) {
  try { await client.callTool({ name: "session_close", arguments: { session_id: id } }); } catch {}
}
console.log(JSON.stringify(out));
await client.close();
