// The view of a session's third cell draws the two before it, read from
// runbox's log of the session's cells (runbox://sessions/{id}/cells)
// through the host; another principal cannot read that log.
//
//   node cells.mjs URL TOKEN OTHER_TOKEN   prints one JSON line of facts
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge } from "@modelcontextprotocol/ext-apps/app-bridge";
import { chromium } from "playwright-core";

const [url, token, other] = process.argv.slice(2);
if (!url || !token || !other) throw new Error("usage: node cells.mjs URL TOKEN OTHER_TOKEN");
const EXT = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";

const connect = async (name, tok, caps) => {
  const c = new Client({ name, version: "1.0.0" }, { capabilities: caps });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${tok}` } } }));
  return c;
};
const client = await connect("runbox-view-host", token, { extensions: { [EXT]: { mimeTypes: [MIME] } } });
const stranger = await connect("runbox-other-host", other, { extensions: { [EXT]: { mimeTypes: [MIME] } } });
const tools = (await client.listTools()).tools;
const viewURI = tools.find((t) => t.name === "run_code")?._meta?.ui?.resourceUri;
const html = (await client.readResource({ uri: viewURI })).contents[0].text;

const facts = {};
const templates = (await client.listResourceTemplates()).resourceTemplates;
facts.template = templates.find((t) => t.uriTemplate.startsWith("runbox://sessions/"))?.uriTemplate ?? null;

const open = await client.callTool({ name: "session_open", arguments: { language: "python" } });
const sid = open.structuredContent.session.session_id;
const cellsURI = `runbox://sessions/${sid}/cells`;
const cell = (code) => ({ language: "python", code, session_id: sid });
// Cells 1 and 2 run without a view, as an agent's calls in a host that
// drew nothing for them (or drew each in a view since gone).
const r1 = await client.callTool({ name: "run_code", arguments: cell("x = 41\nprint('cell one')") });
const r2 = await client.callTool({ name: "run_code", arguments: cell("y = x + 1\nprint('cell two')\nprint(undefined_name)") });
facts.runIds = [r1, r2].map((r) => r.structuredContent?.run_id);

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 900, height: 900 } });
  const HOST = `<!doctype html><html><body style="margin:0"><div id="slot"></div><script>
window.__sendToView = (m) => document.querySelector("iframe").contentWindow.postMessage(m, "*");
window.addEventListener("message", (e) => { const f = document.querySelector("iframe"); if (f && e.source === f.contentWindow) window.__fromView(e.data); });
window.__mount = (html) => {
  const f = document.createElement("iframe");
  f.setAttribute("sandbox", "allow-scripts");
  f.style.cssText = "width:900px;height:880px;border:0";
  f.srcdoc = html; document.getElementById("slot").appendChild(f);
};
</script></body></html>`;
  let toView;
  await page.exposeFunction("__fromView", (m) => toView?.onmessage?.(m));
  await page.setContent(HOST);
  const bridge = new AppBridge(client, { name: "runbox-e2e-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: { theme: "light", platform: "web", containerDimensions: { width: 900, maxHeight: 880 } } });
  toView = { start: async () => {}, close: async () => {}, send: async (m) => { await page.evaluate((x) => window.__sendToView(x), m); } };
  const ready = new Promise((r) => { bridge.oninitialized = r; });
  await bridge.connect(toView);
  await page.evaluate((h) => window.__mount(h), html);
  await ready;
  // Set once connected: connecting installs the bridge's own handlers.
  const reads = [];
  bridge.onreadresource = async (p) => { reads.push(p.uri); return client.readResource(p); };
  const frame = page.frames().find((f) => f !== page.mainFrame());

  // Cell 3, drawn in a new view as a host does for each call.
  const args = cell("print(x + y)");
  await bridge.sendToolInput({ arguments: args });
  const r3 = await client.callTool({ name: "run_code", arguments: args });
  facts.runIds.push(r3.structuredContent?.run_id);
  await bridge.sendToolResult(r3);
  await frame.waitForFunction(() => document.body.hasAttribute("data-history"), null, { timeout: 30000 });
  facts.history = await frame.evaluate(() => document.body.getAttribute("data-history"));
  facts.past = await frame.$$eval(".pastcell", (cs) => cs.map((c) => ({
    cell: c.getAttribute("data-cell"),
    status: c.querySelector(".badge")?.textContent ?? "",
    runId: c.querySelector(".runid")?.textContent ?? "",
    code: [...c.querySelectorAll(".code span")].map((s) => s.textContent),
    stdout: c.querySelector("pre.stdout")?.textContent ?? "",
    error: c.querySelector("section.error")?.textContent ?? "",
    highlighted: [...c.querySelectorAll(".code span.hl")].map((s) => Number(s.getAttribute("data-line"))),
  })));
  facts.current = await frame.$$eval(".cells .cell", (cs) => cs.map((c) => [c.getAttribute("data-cell"), c.querySelector("pre.stdout")?.textContent ?? ""]));
  facts.reads = reads;
  facts.csp = await frame.evaluate(() => document.body.getAttribute("data-csp-violations"));
} finally {
  await browser.close();
}

// The log is its owner's: another principal reads nothing, not even that
// the session exists; and it goes with the session.
const refused = async (c, uri) => {
  try { await c.readResource({ uri }); return ""; } catch (e) { return String(e.message || e); }
};
facts.strangerRead = await refused(stranger, cellsURI);
const own = await client.readResource({ uri: cellsURI });
facts.ownCells = JSON.parse(own.contents[0].text).cells.map((c) => [c.seq, c.status, c.error_kind ?? ""]);
await client.callTool({ name: "session_close", arguments: { session_id: sid } });
facts.afterClose = await refused(client, cellsURI);

console.log(JSON.stringify(facts));
await client.close();
await stranger.close();
process.exit(0);
