// Smoke test with the reference TypeScript SDK client: lists runbox's tools,
// resources and prompts and calls run_code.
//   node smoke.mjs stdio /path/to/runbox
//   node smoke.mjs http  http://127.0.0.1:PORT/mcp TOKEN
//   node smoke.mjs sse   http://127.0.0.1:PORT/sse TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import assert from "node:assert/strict";

const [mode, target, token] = process.argv.slice(2);
assert.ok(mode && target, "usage: node smoke.mjs stdio|http|sse BIN|URL [TOKEN]");
const auth = token ? { headers: { Authorization: `Bearer ${token}` } } : undefined;

let transport;
switch (mode) {
  case "stdio":
    transport = new StdioClientTransport({ command: target, args: ["serve"], stderr: "ignore" });
    break;
  case "http":
    transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: auth });
    break;
  case "sse":
    transport = new SSEClientTransport(new URL(target), {
      requestInit: auth,
      eventSourceInit: { fetch: (url, init) => fetch(url, { ...init, headers: { ...init?.headers, ...auth?.headers } }) },
    });
    break;
  default:
    throw new Error(`unknown mode ${mode}`);
}
const client = new Client({ name: "runbox-ts-smoke", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const runCode = tools.find((t) => t.name === "run_code");
assert.ok(runCode, "run_code is listed");
assert.deepEqual(runCode.inputSchema.required?.sort(), ["code", "language"]);
assert.ok(runCode.outputSchema, "run_code publishes an outputSchema");
assert.equal(runCode.annotations?.readOnlyHint, false);
assert.equal(runCode.annotations?.openWorldHint, false);

const { resources } = await client.listResources();
assert.ok(resources.some((r) => r.uri === "runbox://manifest"), "runbox://manifest is listed");
const { prompts } = await client.listPrompts();
assert.deepEqual(prompts.map((p) => p.name).sort(), ["debug_failed_run", "run_code_guide"]);

// The SDK validates structuredContent against the outputSchema itself.
const ok = await client.callTool({ name: "run_code", arguments: { language: "python", code: "open('out.txt','w').write('x')\nprint(6 * 7)" } });
assert.ok(!ok.isError, JSON.stringify(ok)); // isError is optional and false when absent
assert.equal(ok.structuredContent.status, "ok");
assert.equal(ok.structuredContent.stdout, "42\n");
assert.equal(ok.structuredContent.error, null);
const link = ok.content.find((c) => c.type === "resource_link");
assert.ok(link, "artifacts come as resource links");
const file = await client.readResource({ uri: link.uri });
assert.equal(file.contents[0].text, "x");

const bad = await client.callTool({ name: "run_code", arguments: { language: "javascript", code: "const x = ;" } });
assert.equal(bad.isError, true);
assert.equal(bad.structuredContent.error.kind, "syntax");
assert.equal(bad.structuredContent.error.line, 1);

await client.close();
console.log(`ts smoke (${mode}): ${tools.length} tool(s), ${resources.length} resource(s), ${prompts.length} prompt(s); run_code, artifacts and errors as expected`);
