// Sessions with the reference TypeScript SDK client: the SDK validates each
// structuredContent against the tool's outputSchema itself.
//   node session.mjs /path/to/runbox
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import assert from "node:assert/strict";

const [bin] = process.argv.slice(2);
assert.ok(bin, "usage: node session.mjs BIN");
const client = new Client({ name: "runbox-ts-session", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: bin, args: ["serve"], stderr: "ignore" }));

const { tools } = await client.listTools();
for (const name of ["session_open", "session_close", "session_list"]) {
  assert.ok(tools.some((t) => t.name === name), `${name} is listed`);
}
assert.ok(tools.find((t) => t.name === "run_code").inputSchema.properties.session_id, "run_code takes session_id");

const opened = await client.callTool({ name: "session_open", arguments: { language: "python" } });
assert.ok(!opened.isError, JSON.stringify(opened));
const id = opened.structuredContent.session.session_id;
assert.match(id, /^s_[A-Za-z0-9_-]{32}$/);

const first = await client.callTool({ name: "run_code", arguments: { language: "python", code: "import math\nr = 2", session_id: id } });
assert.ok(!first.isError, JSON.stringify(first));
const second = await client.callTool({ name: "run_code", arguments: { language: "python", code: "round(math.pi * r * r, 2)", session_id: id } });
assert.equal(second.structuredContent.stdout, "12.57\n");
assert.equal(second.structuredContent.session.call, 2);
assert.equal(second.structuredContent.session.state, "alive");

const listed = await client.callTool({ name: "session_list", arguments: {} });
assert.deepEqual(listed.structuredContent.sessions.map((s) => s.session_id), [id]);

const foreign = await client.callTool({ name: "run_code", arguments: { language: "python", code: "print(r)", session_id: "s_" + "A".repeat(32) } });
assert.equal(foreign.isError, true);
assert.equal(foreign.structuredContent.error.kind, "session_not_found");

const closed = await client.callTool({ name: "session_close", arguments: { session_id: id } });
assert.equal(closed.structuredContent.closed, true);
const after = await client.callTool({ name: "run_code", arguments: { language: "python", code: "print(r)", session_id: id } });
assert.equal(after.structuredContent.error.kind, "session_not_found");

await client.close();
console.log("ts session: open, state across calls, list, foreign id, close as expected");
