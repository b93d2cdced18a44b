// Smoke test with the reference TypeScript SDK client: lists runbox's tools
// and calls run_code over stdio. Usage: node smoke.mjs /path/to/runbox
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import assert from "node:assert/strict";

const bin = process.argv[2];
assert.ok(bin, "usage: node smoke.mjs RUNBOX_BIN");

const transport = new StdioClientTransport({ command: bin, args: ["serve"], stderr: "ignore" });
const client = new Client({ name: "runbox-ts-smoke", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const runCode = tools.find((t) => t.name === "run_code");
assert.ok(runCode, "run_code is listed");
assert.deepEqual(runCode.inputSchema.required?.sort(), ["code", "language"]);
assert.ok(runCode.outputSchema, "run_code publishes an outputSchema");
assert.equal(runCode.annotations?.readOnlyHint, false);

// The SDK validates structuredContent against the outputSchema itself.
const ok = await client.callTool({ name: "run_code", arguments: { language: "python", code: "print(6 * 7)" } });
assert.ok(!ok.isError, JSON.stringify(ok)); // isError is optional and false when absent
assert.equal(ok.structuredContent.status, "ok");
assert.equal(ok.structuredContent.stdout, "42\n");
assert.equal(ok.structuredContent.error, null);

const bad = await client.callTool({ name: "run_code", arguments: { language: "javascript", code: "const x = ;" } });
assert.equal(bad.isError, true);
assert.equal(bad.structuredContent.error.kind, "syntax");
assert.equal(bad.structuredContent.error.line, 1);

await client.close();
console.log(`ts smoke: ${tools.length} tool(s); run_code ok and syntax error both as expected`);
