// A test host for runbox's MCP Apps view: the reference TypeScript SDK
// client talks to runbox over streamable HTTP and declares the extension;
// ext-apps' AppBridge (the host side of MCP Apps) serves the view, which
// headless Chromium draws in a sandboxed iframe, the way hosts draw it.
// The bridge runs here, beside the client; the page in the browser only
// carries its messages to and from the view's frame, and records any
// message that comes from anywhere else.
//
//   node view.mjs test  URL TOKEN SHOT.png   prints one JSON line of DOM facts
//   node view.mjs bench URL TOKEN ROUNDS     prints one JSON line of timings
//   node view.mjs shot  URL TOKEN SHOT.png   the picture in docs/view.png
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge } from "@modelcontextprotocol/ext-apps/app-bridge";
import { chromium } from "playwright-core";

const [mode, url, token, arg] = process.argv.slice(2);
if (!mode || !url) throw new Error("usage: node view.mjs test|bench URL TOKEN [SHOT|ROUNDS]");
const EXT = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";

const client = new Client({ name: "runbox-view-host", version: "1.0.0" }, { capabilities: { extensions: { [EXT]: { mimeTypes: [MIME] } } } });
const auth = token ? { headers: { Authorization: `Bearer ${token}` } } : {};
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: auth }));
const bare = new Client({ name: "runbox-plain-client", version: "1.0.0" }, { capabilities: {} });
await bare.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: auth }));

const facts = {};
const tools = (await client.listTools()).tools;
const uiOf = (t) => t?._meta?.ui?.resourceUri;
facts.viewTools = tools.filter((t) => uiOf(t)).map((t) => t.name).sort();
facts.plainViewTools = (await bare.listTools()).tools.filter((t) => uiOf(t)).map((t) => t.name);
const uri = uiOf(tools.find((t) => t.name === "run_code"));
const res = await client.readResource({ uri });
const page0 = res.contents[0];
facts.viewMime = page0.mimeType;
facts.viewBytes = Buffer.byteLength(page0.text);
facts.viewCsp = page0._meta?.ui?.csp;
const html = page0.text;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const console_ = [];
const requests = [], blocked = [];
const page = await browser.newPage({ viewport: { width: 900, height: 900 } });
page.on("console", (m) => console_.push(`${m.type()}: ${m.text()}`));
// A request to anywhere but data:/blob:/about: reached out unless the
// browser refused it for the policy before it left.
const remote = (u) => !/^(data|blob|about):/.test(u);
page.on("requestfinished", (r) => { if (remote(r.url())) requests.push(r.url()); });
page.on("requestfailed", (r) => { if (remote(r.url())) (r.failure()?.errorText === "csp" ? blocked : requests).push(r.url()); });
let stray = 0;
await page.exposeFunction("__stray", () => { stray++; });

const HOST = `<!doctype html><html><body style="margin:0"><div id="slot"></div><script>
window.__sendToView = (m) => document.querySelector("iframe").contentWindow.postMessage(m, "*");
window.addEventListener("message", (e) => {
  const f = document.querySelector("iframe");
  if (f && e.source === f.contentWindow) window.__fromView(e.data); else window.__stray();
});
window.__mount = (html) => {
  const slot = document.getElementById("slot"); slot.textContent = "";
  const f = document.createElement("iframe");
  f.setAttribute("sandbox", "allow-scripts");
  f.style.cssText = "width:900px;height:880px;border:0";
  f.srcdoc = html; slot.appendChild(f);
};
</script></body></html>`;

let bridge, toView;
const sizes = [];
await page.exposeFunction("__fromView", (m) => toView?.onmessage?.(m));
await page.setContent(HOST);

// mount draws a fresh view and connects a fresh bridge to it.
async function mount(theme = "light") {
  bridge = new AppBridge(client, { name: "runbox-e2e-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, logging: {}, downloadFile: {} },
    { hostContext: { theme, platform: "web", containerDimensions: { width: 900, maxHeight: 880 } } });
  toView = { start: async () => {}, close: async () => {}, send: async (m) => { await page.evaluate((x) => window.__sendToView(x), m); } };
  const ready = new Promise((r) => { bridge.oninitialized = r; });
  bridge.onsizechange = (p) => { sizes.push(p.height); };
  await bridge.connect(toView);
  await page.evaluate((h) => window.__mount(h), html);
  await ready;
  const frame = page.frames().find((f) => f !== page.mainFrame());
  return frame;
}

// show makes a real call through the client and hands the view its input
// and result, as a host does: the view is mounted while the call runs.
// reads collects what the view read through the host (resources/read).
// ms is the time from tools/call to the view painted with its result.
async function show(name, args, { reads, theme } = {}) {
  const t0 = performance.now();
  const [frame, result] = await Promise.all([
    mount(theme).then(async (f) => { await bridge.sendToolInput({ arguments: args }); return f; }),
    client.callTool({ name, arguments: args }),
  ]);
  if (reads) bridge.onreadresource = async (p) => {
    const r = await client.readResource(p);
    reads.push(r.contents[0]);
    return r;
  };
  const t1 = performance.now();
  await bridge.sendToolResult(result);
  await frame.waitForFunction(() => document.body.getAttribute("data-rendered") === "1", null, { polling: "raf", timeout: 30000 });
  const t2 = performance.now();
  return { frame, ms: t2 - t0, paintMs: t2 - t1, result };
}

const text = (frame, sel) => frame.$eval(sel, (e) => e.textContent).catch(() => null);

if (mode === "bench") {
  // Interleaved: the call alone, then the same call drawn in the view.
  const rounds = Number(arg || 7), call = [], view = [], paint = [];
  const p50 = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
  await show("run_code", { language: "python", code: "print('warm')" });
  for (let i = 0; i < rounds; i++) {
    const args = { language: "python", code: `print(${i})` };
    const t0 = performance.now();
    await client.callTool({ name: "run_code", arguments: args });
    call.push(performance.now() - t0);
    const v = await show("run_code", args);
    view.push(v.ms);
    paint.push(v.paintMs);
  }
  console.log(JSON.stringify({ rounds, call_p50_ms: p50(call), view_p50_ms: p50(view), paint_p50_ms: p50(paint), view_min_ms: Math.min(...view), view_max_ms: Math.max(...view) }));
  await browser.close(); await client.close(); await bare.close();
  process.exit(0);
}

if (mode === "shot") {
  // The README's picture: a real analysis with a chart, a table displayed
  // from the box and a runtime error on its line.
  const code = [
    "import matplotlib.pyplot as plt, pandas as pd",
    "sales = pd.DataFrame({'region': ['north', 'south', 'east', 'west'], 'amount': [8, 4, 11, 6]})",
    "print('\\x1b[1;32mloaded\\x1b[0m', len(sales), 'rows')",
    "display(sales)",
    "sales.plot.bar(x='region', y='amount', figsize=(4, 2.4), legend=False, color='#2962d9')",
    "plt.tight_layout(); plt.show()",
    "totals = dict(zip(sales.region, sales.amount))",
    "print('share of central:', totals['central'] / sum(totals.values()))",
  ].join("\n");
  await show("run_code", { language: "python", code });
  const frame = page.frames().find((f) => f !== page.mainFrame());
  await frame.waitForFunction(() => [...document.querySelectorAll("img.display")].every((i) => i.complete && i.naturalWidth > 0) && document.querySelector("table.rt tbody tr"), null, { timeout: 15000 });
  const h = await frame.evaluate(() => document.documentElement.scrollHeight);
  await page.setViewportSize({ width: 900, height: Math.min(h + 4, 1400) });
  await page.evaluate((h) => { document.querySelector("iframe").style.height = h + "px"; }, h + 4);
  await page.waitForTimeout(500); // the frame's newly shown part painted
  await page.screenshot({ path: arg });
  await browser.close(); await client.close(); await bare.close();
  process.exit(0);
}

// 1. Output with ANSI colours, a PNG artifact, metrics; the dark theme.
{
  const code = [
    "import struct, zlib",
    "print('\\x1b[31mred\\x1b[0m and plain')",
    "w, h = 37, 23",
    "raw = b''.join(b'\\x00' + bytes(v for x in range(w) for v in (x * 7 % 256, y * 11 % 256, 128)) for y in range(h))",
    "chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))",
    "open('out.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))",
  ].join("\n");
  const { frame, result } = await show("run_code", { language: "python", code }, { theme: "dark" });
  facts.runStatus = result.structuredContent?.status;
  facts.stdout = await text(frame, "#stdout");
  facts.redSpan = await frame.$eval("#stdout span", (e) => [e.textContent, getComputedStyle(e).color]).catch(() => null);
  facts.theme = await frame.evaluate(() => document.documentElement.getAttribute("data-theme"));
  await frame.waitForFunction(() => { const i = document.querySelector(".artifacts img"); return i && i.complete && i.naturalWidth > 0; }, null, { timeout: 15000 }).catch(() => {});
  facts.artifactImage = await frame.$eval(".artifacts img", (i) => [i.naturalWidth, i.naturalHeight]).catch(() => null);
  facts.metrics = await frame.$$eval("dl.metrics dt", (d) => d.map((x) => x.textContent)).catch(() => []);
  // "Run again" goes back through the host as an ordinary tools/call.
  let calls = 0;
  bridge.oncalltool = async (p, extra) => { calls++; return client.callTool(p); };
  await frame.click("button.again");
  await frame.waitForFunction(() => document.body.getAttribute("data-rendered") === "2", null, { timeout: 30000 }).catch(() => {});
  facts.runAgain = { calls, stdout: await text(frame, "#stdout") };
  // A download: the view asks the host, which reads the artifact.
  const downloads = [];
  bridge.ondownloadfile = async ({ contents }) => {
    for (const c of contents) {
      const r = await client.readResource({ uri: c.uri });
      downloads.push([c.type, c.name, Buffer.from(r.contents[0].blob ?? "", "base64").length]);
    }
    return {};
  };
  await frame.click("button.download");
  await frame.waitForFunction(() => true, null, { timeout: 1000 });
  for (let i = 0; i < 50 && !downloads.length; i++) await page.waitForTimeout(100);
  facts.downloads = downloads;
  facts.artifactSize = result.structuredContent?.artifacts?.[0]?.size_bytes;
  // The host's theme changes: the view follows.
  await bridge.setHostContext({ theme: "light" });
  await frame.waitForFunction(() => document.documentElement.getAttribute("data-theme") === "light", null, { timeout: 5000 }).catch(() => {});
  facts.themeAfter = await frame.evaluate(() => document.documentElement.getAttribute("data-theme"));
  facts.sizes = sizes.length;
  facts.lastHeight = sizes[sizes.length - 1] ?? 0;
  facts.shot = arg;
  if (arg) {
    const png = await page.screenshot({ path: arg });
    facts.shotColours = await page.evaluate(async (b64) => {
      const img = new Image(); img.src = "data:image/png;base64," + b64; await img.decode();
      const c = document.createElement("canvas"); c.width = img.width; c.height = img.height;
      const g = c.getContext("2d"); g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
      for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return seen.size;
    }, png.toString("base64"));
  }
  facts.cspAfterRun = await frame.evaluate(() => document.body.getAttribute("data-csp-violations"));
}

// 2. A syntax error: its line highlighted in the code.
{
  const code = "x = 1\ny = (x +\nprint(y)\n";
  const { frame, result } = await show("run_code", { language: "python", code });
  facts.syntaxLine = result.structuredContent?.error?.line;
  facts.highlighted = await frame.$$eval(".code span.hl", (s) => s.map((e) => Number(e.getAttribute("data-line"))));
  facts.errorText = await text(frame, "section.error");
}

facts.consoleOwn = console_.slice();

// 3. Displays from a real run in the box: a figure shown, a DataFrame of
// 120 rows, hostile HTML, SVG and markdown that must stay inert, a PNG
// runbox refused, a Series with a named index.
{
  const evil = [
    "<script>document.body.append('SCRIPT RAN');parent.postMessage({jsonrpc:'2.0',id:99,method:'tools/call',params:{name:'run_code',arguments:{language:'bash',code:'echo pwned'}}},'*');top.postMessage('x','*');window.top.location='https://example.com/bust'</script>",
    "<img src='https://example.com/remote.png' onerror=\"parent.postMessage('img','*')\">",
    "<img src='data:image/png;base64,AAAA' onerror=\"document.body.append('HANDLER RAN')\">",
    "<meta http-equiv='refresh' content='0;url=https://example.com/refresh'>",
    "<form action='https://example.com/f'><input name=q></form><a href='javascript:parent.postMessage(1,\"*\")'>x</a>",
    "<iframe src='https://example.com/frame'></iframe><p id=ok>html display</p>",
  ].join("");
  const svg = "<svg xmlns='http://www.w3.org/2000/svg' width='40' height='30' onload=\"parent.postMessage('svg','*')\"><script>top.postMessage('svg2','*')</script><image href='https://example.com/s.png'/><rect width='40' height='30' fill='teal'/></svg>";
  const md = "# Title\n\n- **bold** item\n- [link](javascript:alert(1)) and ![pic](https://example.com/m.png)\n\n<script>parent.postMessage('md','*')</script>";
  // JSON strings of ASCII text are Python string literals.
  const code = [
    "import matplotlib.pyplot as plt, pandas as pd",
    "print('displays')",
    "plt.figure(figsize=(3.2, 2.1), dpi=100); plt.plot([1, 2, 3]); plt.show()",
    "display(pd.DataFrame({'name': [f'row{i}' for i in range(120)], 'n': [(i * 37) % 101 for i in range(120)]}))",
    `display({'text/html': ${JSON.stringify(evil)}}, raw=True)`,
    `display({'image/svg+xml': ${JSON.stringify(svg)}}, raw=True)`,
    `display({'text/markdown': ${JSON.stringify(md)}}, raw=True)`,
    "display({'image/png': b'GIF89a not a png'}, raw=True)  # refused: a cut and no data",
    "display(pd.Series([3, 1], index=pd.Index(['a', 'b'], name='key'), name='v'))",
  ].join("\n");
  const reads = [];
  const { frame, result } = await show("run_code", { language: "python", code }, { reads });
  const ds = result.structuredContent?.displays ?? [];
  facts.realDisplays = ds.map((d) => [d.source, Object.keys(d.mimes).sort().join(" "), d.cut ?? ""]);
  const png = ds.find((d) => d.mimes["image/png"])?.mimes["image/png"];
  facts.pngMeta = png ? [png.width, png.height] : null;
  await frame.waitForFunction(() => document.querySelectorAll("table.rt").length === 2 && document.querySelectorAll("img.display").length === 2 && [...document.querySelectorAll("img.display")].every((i) => i.complete && i.naturalWidth > 0) && document.querySelector("iframe.display"), null, { timeout: 15000 }).catch(() => {});
  // The PNG the view read through the host: its size from its header.
  const pngRead = reads.find((c) => c.uri === png?.uri);
  const pngBytes = Buffer.from(pngRead?.blob ?? "", "base64");
  facts.pngRead = pngBytes.length >= 24 ? [pngBytes.readUInt32BE(16), pngBytes.readUInt32BE(20)] : null;
  const T = ".display-item[data-mime='application/vnd.runbox.table+json']";
  const first = `${T}:nth-child(3) table.rt`; // after the section's heading and the figure
  facts.tableRows = await frame.$$eval(`${first} tbody tr`, (r) => r.length);
  facts.tableFirst = await frame.$$eval(`${first} tbody tr:first-child td`, (d) => d.map((x) => x.textContent));
  facts.page1 = await text(frame, `${T}:nth-child(3) .pageinfo`);
  await frame.click(`${first} th:nth-child(2)`);
  facts.sortedFirst = await frame.$$eval(`${first} tbody tr:first-child td`, (d) => d.map((x) => x.textContent));
  await frame.click(`${first} th:nth-child(2)`);
  facts.sortedDescFirst = await frame.$$eval(`${first} tbody tr:first-child td`, (d) => d.map((x) => x.textContent));
  await frame.click(`${T}:nth-child(3) .tablebar button:nth-of-type(2)`);
  facts.page2 = await text(frame, `${T}:nth-child(3) .pageinfo`);
  await frame.click(`${T}:nth-child(3) button.copycsv`);
  facts.csvLines = await frame.$eval(`${T}:nth-child(3) textarea.csv`, (t) => t.value.split("\n").length);
  facts.seriesHead = await frame.$$eval(`${T}:last-child table.rt th`, (h) => h.map((x) => x.textContent));
  facts.seriesFirst = await frame.$$eval(`${T}:last-child table.rt tbody tr:first-child td`, (d) => d.map((x) => x.textContent));
  facts.cutNotes = await frame.$$eval(".display-item p.cut", (p) => p.map((x) => x.textContent));
  if (arg) await page.screenshot({ path: arg.replace(/\.png$/, "-displays.png") });
  facts.displayImages = await frame.$$eval("img.display", (is) => is.filter((i) => !i.closest(".artifacts")).map((i) => [i.getAttribute("alt"), i.naturalWidth, i.naturalHeight]));
  facts.markdown = await frame.$$eval(".md li", (l) => l.map((x) => x.textContent));
  facts.markdownScripts = await frame.$$eval(".md script, .md img, .md a", (l) => l.length);
  await page.waitForTimeout(1500); // time for anything hostile to try
  const inner = page.frames().filter((f) => f.parentFrame() === frame);
  facts.htmlFrames = inner.length;
  facts.htmlSandbox = await frame.$$eval("iframe.display", (fs) => fs.map((f) => f.getAttribute("sandbox")));
  facts.htmlText = await Promise.all(inner.map((f) => f.evaluate(() => document.body?.innerText ?? "").catch((e) => "ERR " + e.message)));
  facts.innerURLs = inner.map((f) => f.url());
  facts.topURL = page.url();
  facts.cspHostile = await frame.evaluate(() => document.body.getAttribute("data-csp-violations"));
}

// 4. A session: the first cell from the agent, the next one typed in the
// view, run through the host bridge in the same interpreter.
{
  const open = await client.callTool({ name: "session_open", arguments: { language: "python" } });
  const sid = open.structuredContent.session.session_id;
  const { frame } = await show("run_code", { language: "python", code: "x = 41\nprint('cell one')", session_id: sid });
  bridge.oncalltool = async (p) => client.callTool(p);
  await frame.fill("textarea.nextcell", "print(x + 1)");
  await frame.click("button.runcell");
  await frame.waitForFunction(() => document.querySelectorAll(".cell").length === 2, null, { timeout: 30000 }).catch(() => {});
  facts.cells = await frame.$$eval(".cell", (cs) => cs.map((c) => [c.getAttribute("data-cell"), c.querySelector("pre.stdout")?.textContent ?? ""]));
  await client.callTool({ name: "session_close", arguments: { session_id: sid } });
}

// 5. Displays at their place in the output: text, a figure shown, text
// again; the colour set before the figure still colours the text after.
{
  const code = [
    "import matplotlib.pyplot as plt",
    "print('\\x1b[31mred a')",
    "plt.figure(figsize=(2, 1), dpi=100); plt.plot([1, 2]); plt.show()",
    "print('still red\\x1b[0m b')",
    "display({'text/markdown': '**last**'}, raw=True)",
  ].join("\n");
  const { frame } = await show("run_code", { language: "python", code });
  facts.interleaved = await frame.$$eval("#app pre.stdout, #app .display-item", (es) => es.map((e) => e.matches(".display-item") ? "display " + e.getAttribute("data-mime") + " in " + e.closest("section").querySelector("h3").textContent : "text " + e.textContent));
  facts.carriedColour = await frame.$eval("#app pre.stdout:not(#stdout) span", (e) => [e.textContent, getComputedStyle(e).color]).catch(() => null);
}

facts.stray = stray;
facts.remoteRequests = requests;
facts.blockedByPolicy = blocked;
facts.console = console_;
console.log(JSON.stringify(facts));
await browser.close();
await client.close();
await bare.close();
process.exit(0);
