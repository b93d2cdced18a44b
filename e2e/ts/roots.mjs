// MCP roots with the reference TypeScript SDK client, which speaks a
// protocol before 2026-07-28: runbox asks it with roots/list, and the SDK
// validates each structuredContent against the tool's outputSchema.
//   node roots.mjs BIN MANIFEST PROJECT OTHER
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { pathToFileURL } from "node:url";
import assert from "node:assert/strict";

const [bin, manifest, project, other] = process.argv.slice(2);
assert.ok(other, "usage: node roots.mjs BIN MANIFEST PROJECT OTHER");
let roots = [{ uri: pathToFileURL(project).href, name: "proj" }];
let asked = 0;
const client = new Client({ name: "runbox-ts-roots", version: "1.0.0" }, { capabilities: { roots: { listChanged: true } } });
client.setRequestHandler(ListRootsRequestSchema, async () => {
  asked++;
  return { roots };
});
await client.connect(new StdioClientTransport({ command: bin, args: ["serve", "--manifest", manifest], stderr: "ignore" }));

const run = (code) => client.callTool({ name: "run_code", arguments: { language: "bash", code } });
const first = await run("wc -l < /mnt/roots/proj/data/sales.csv; ls /mnt/roots");
assert.ok(!first.isError, JSON.stringify(first));
assert.equal(first.structuredContent.stdout, "3\nproj\n");
assert.deepEqual(first.structuredContent.roots, [{ path: "/mnt/roots/proj", uri: roots[0].uri }]);

roots = [{ uri: pathToFileURL(other).href }];
await client.sendRootsListChanged();
const second = await run("ls /mnt/roots");
assert.equal(second.structuredContent.stdout, "other\n");
assert.equal(second.structuredContent.roots[0].path, "/mnt/roots/other");
assert.ok(asked >= 2, `roots/list asked ${asked} times`);

await client.close();
console.log(`ts roots: mounted, named in the result, changed roots count from the next call (roots/list asked ${asked} times)`);
