// Two or more runbox builds side by side with the reference TypeScript SDK
// client, round by round, so that the machine's drift weighs on each
// alike: per server, each round, 10 no-op calls (session_list, one session
// open) and 10 cells print(1) alternating, then cells back to back for 300
// ms. Prints, per server, the no-op's and the cell's p50, their ratio and
// the time a cell back to back.
//   node cells_ab.mjs SDK_DIR ROUNDS RUNBOX_A RUNBOX_B ...
// SDK_DIR is a folder whose node_modules has @modelcontextprotocol/sdk
// (e2e/ts after `npm ci`); each RUNBOX finds its runbox-init beside it.
// The servers run on the Docker backend; their logs are dropped.
import { createRequire } from "node:module";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const [sdkDir, rounds, ...bins] = process.argv.slice(2);
if (!sdkDir || !(Number(rounds) > 0) || bins.length === 0) {
  console.error("usage: node cells_ab.mjs SDK_DIR ROUNDS RUNBOX_A [RUNBOX_B ...]");
  process.exit(2);
}
const require = createRequire(path.resolve(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const dir = mkdtempSync(path.join(os.tmpdir(), "runbox-cells-ab-"));
const manifest = path.join(dir, "runbox.yaml");
writeFileSync(manifest, "backend: docker\nsessions:\n  max_per_client: 64\n  max_open: 64\n");
const servers = [];
try {
  for (const bin of bins) {
    const c = new Client({ name: "runbox-cells-ab", version: "1" });
    await c.connect(new StdioClientTransport({ command: bin, args: ["serve", "--manifest", manifest], stderr: "ignore" }));
    await c.listTools();
    const r = await c.callTool({ name: "session_open", arguments: { language: "python" } });
    if (r.isError) throw new Error("session_open: " + JSON.stringify(r).slice(0, 300));
    servers.push({ bin, c, id: r.structuredContent.session.session_id, noop: [], cell: [], b2bMs: 0, b2b: 0 });
  }
  const cell = async (s) => {
    const r = await s.c.callTool({ name: "run_code", arguments: { language: "python", code: "print(1)", session_id: s.id } });
    if (r.isError || r.structuredContent?.stdout !== "1\n") throw new Error("run_code: " + JSON.stringify(r).slice(0, 300));
  };
  const noop = (s) => s.c.callTool({ name: "session_list", arguments: {} });
  for (const s of servers) for (let i = 0; i < 20; i++) { await cell(s); await noop(s); } // warm-up
  for (let r = 0; r < Number(rounds); r++) {
    for (const s of servers) {
      for (let i = 0; i < 10; i++) {
        let t = performance.now(); await noop(s); s.noop.push(performance.now() - t);
        t = performance.now(); await cell(s); s.cell.push(performance.now() - t);
      }
      const t0 = performance.now();
      while (performance.now() - t0 < 300) { await cell(s); s.b2b++; }
      s.b2bMs += performance.now() - t0;
    }
  }
  const p50 = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  for (const s of servers) {
    const n = p50(s.noop), c = p50(s.cell);
    console.log(`${s.bin}\tno-op ${n.toFixed(3)} ms\tcell ${c.toFixed(3)} ms\tratio ${(c / n).toFixed(2)}\tback to back ${(s.b2bMs / s.b2b).toFixed(3)} ms a cell`);
  }
} finally {
  for (const s of servers) {
    try { await s.c.callTool({ name: "session_close", arguments: { session_id: s.id } }); } catch {}
    await s.c.close();
  }
  rmSync(dir, { recursive: true, force: true });
}
