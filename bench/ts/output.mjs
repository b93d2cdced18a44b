// The bench's large-output row with the reference TypeScript SDK client:
// run_code writing 1 MiB to stdout, then a read of the stdout resource
// its answer names (the answer shows limits.answer_output_chars of it).
// Prints the calls' times as JSON; the Go bench makes the row.
//   node output.mjs SDK_DIR RUNBOX MANIFEST N PACE_MS
// SDK_DIR is a folder whose node_modules has @modelcontextprotocol/sdk
// (e2e/ts after `npm ci`).
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, bin, manifest, n, paceMs] = process.argv.slice(2);
const require = createRequire(path.resolve(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const code = "import sys\nsys.stdout.write('x' * 1048576)";
const client = new Client({ name: "runbox-bench-ts", version: "1" });
await client.connect(new StdioClientTransport({ command: bin, args: ["serve", "--manifest", manifest], stderr: "ignore" }));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function once() {
  const res = await client.callTool({ name: "run_code", arguments: { language: "python", code } });
  const sc = res.structuredContent;
  if (res.isError || sc?.status !== "ok") throw new Error("run_code failed: " + JSON.stringify(sc).slice(0, 300));
  let out = sc.stdout;
  if (sc.stdout_cut?.uri) {
    const r = await client.readResource({ uri: sc.stdout_cut.uri });
    out = r.contents[0].text;
  }
  if (out.length !== 1048576) throw new Error(`stdout of ${out.length} characters`);
}

await sleep(6000); // the pool fills
const ms = [];
try {
  await once(); // warm-up, not counted
  await sleep(Number(paceMs));
  for (let i = 0; i < Number(n); i++) {
    const t = performance.now();
    await once();
    ms.push(performance.now() - t);
    await sleep(Number(paceMs));
  }
  console.log(JSON.stringify({ ms }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
}
await client.close();
