// Headless Chromium opens a preview's URL (session_expose's) the way the
// person would, and reports what the box's page could do and could see.
//
//   node expose.mjs URL SHOT.png   prints one JSON line of facts
//
// The page the box serves fills #fetch, #ws and #sse from a JSON fetch
// with a relative link, a WebSocket echo and server-sent events, and
// #cookie, #href and #referrer with what its script can read.
import { chromium } from "playwright-core";

const [url, shot] = process.argv.slice(2);
if (!url) throw new Error("usage: node expose.mjs URL [SHOT.png]");
const token = new URL(url).searchParams.get("runbox_token");

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const facts = { navigations: [], requests: [], console: [] };
try {
  const context = await browser.newContext({ viewport: { width: 800, height: 600 } });
  const page = await context.newPage();
  page.on("console", (m) => facts.console.push(`${m.type()}: ${m.text()}`));
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) facts.navigations.push(f.url()); });
  page.on("request", (r) => facts.requests.push(`${r.method()} ${r.url()}`));
  await page.goto(url);
  // The landing page goes on to the same path without the token.
  await page.waitForURL((u) => !u.searchParams.has("runbox_token"), { timeout: 60_000 });
  await page.waitForFunction(() => ["fetch", "ws", "sse"].every((id) => document.getElementById(id)?.dataset.done === "1"), null, { timeout: 60_000 });
  Object.assign(facts, await page.evaluate(() => {
    const text = (id) => document.getElementById(id).textContent;
    return { fetch: text("fetch"), ws: text("ws"), sse: text("sse"), cookie: text("cookie"), href: text("href"), referrer: text("referrer"), title: document.title };
  }));
  facts.finalURL = page.url();
  // What the browser keeps: runbox's cookie, out of the page's reach.
  facts.cookies = (await context.cookies()).map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path, isToken: c.value === token }));
  if (shot) facts.shotBytes = (await page.screenshot({ path: shot })).length;
  // Whether the page could have learned the token anywhere it can read.
  facts.tokenInPage = await page.evaluate((t) => {
    const seen = [document.cookie, location.href, document.referrer, document.documentElement.outerHTML, JSON.stringify(performance.getEntries().map((e) => e.name))];
    return seen.some((s) => s.includes(t));
  }, token);
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(facts) + "\n");
