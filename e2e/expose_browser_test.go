//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// browserApp is a session's web app of the standard library whose page
// runs JavaScript: a JSON fetch by a relative link, a WebSocket echo and
// server-sent events, each written into the DOM, with what the page's
// script can read (its cookies, its URL, its referrer).
const browserApp = `import threading, http.server, hashlib, base64, struct, json, time
PAGE = b"""<!doctype html><meta charset=utf-8><title>made in the box</title>
<h1>made in the box</h1>
<p>fetch: <span id=fetch>pending</span><p>ws: <span id=ws>pending</span><p>sse: <span id=sse>pending</span>
<p>cookie: <span id=cookie></span><p>href: <span id=href></span><p>referrer: <span id=referrer></span>
<script>
function done(id, v) { var e = document.getElementById(id); e.textContent = v; e.dataset.done = "1"; }
document.getElementById("cookie").textContent = document.cookie;
document.getElementById("href").textContent = location.href;
document.getElementById("referrer").textContent = document.referrer;
fetch("api/data").then(function (r) { return r.json(); }).then(function (j) { done("fetch", JSON.stringify(j)); }, function (e) { done("fetch", "error: " + e); });
var ws = new WebSocket("ws://" + location.host + "/ws");
ws.onopen = function () { ws.send("ping from the page"); };
ws.onmessage = function (ev) { done("ws", ev.data); ws.close(); };
ws.onerror = function () { done("ws", "error"); };
var got = [], es = new EventSource("events");
es.onmessage = function (ev) { got.push(ev.data); if (got.length === 3) { es.close(); done("sse", got.join(",")); } };
es.onerror = function () { if (got.length < 3) { es.close(); done("sse", "error after [" + got.join(",") + "]"); } };
</script>
"""
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def body(self, b, ctype, status=200, extra=()):
        self.send_response(status); self.send_header("Content-Type", ctype); self.send_header("Content-Length", str(len(b)))
        for k, v in extra: self.send_header(k, v)
        self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        if self.path == "/":
            self.body(PAGE, "text/html; charset=utf-8", extra=[("Set-Cookie", "app=visible; Path=/")])
        elif self.path == "/api/data":
            self.body(json.dumps({"answer": 42, "cookie": self.headers.get("Cookie", "")}).encode(), "application/json")
        elif self.path == "/events":
            self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.send_header("Cache-Control", "no-store"); self.end_headers()
            self.wfile.write(b"retry: 60000\n\n")
            for word in ("one", "two", "three"):
                self.wfile.write(b"data: " + word.encode() + b"\n\n"); self.wfile.flush(); time.sleep(0.1)
            # Held open, as event streams are, until the page closes it.
            self.connection.settimeout(60)
            try: self.rfile.read(1)
            except OSError: pass
            self.close_connection = True
        elif self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"]
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101); self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", acc); self.end_headers(); self.wfile.flush()
            while True:
                h = self.rfile.read(2)
                if len(h) < 2: break
                op, n = h[0] & 15, h[1] & 127
                if n == 126: n = struct.unpack(">H", self.rfile.read(2))[0]
                elif n == 127: n = struct.unpack(">Q", self.rfile.read(8))[0]
                mask = self.rfile.read(4) if h[1] & 128 else b"\0\0\0\0"
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                if op == 8:
                    self.wfile.write(b"\x88\x00"); self.wfile.flush(); break
                if op == 1: data = b"echo: " + data
                self.wfile.write(bytes([128 | op]) + (bytes([len(data)]) if len(data) < 126 else b"\x7e" + struct.pack(">H", len(data))) + data); self.wfile.flush()
            self.close_connection = True
        else:
            self.body(b"not found", "text/plain", 404)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
`

// browserFacts is what expose.mjs reports.
type browserFacts struct {
	Fetch, WS, SSE, Cookie, Href, Referrer, Title, FinalURL string
	Navigations, Requests, Console                          []string
	Cookies                                                 []struct {
		Name, SameSite, Path string
		HTTPOnly             bool `json:"httpOnly"`
		IsToken              bool
	}
	ShotBytes   int
	TokenInPage bool
}

// TestExposeBrowser: headless Chromium opens the URL session_expose
// printed; the box's page fetches JSON by a relative link (the cookie
// carries the token), echoes over a WebSocket and reads server-sent
// events, and its script can read the token nowhere: not in its cookies
// (runbox's is HttpOnly), its URL after the first redirect, its referrer
// or its document. session_list names the exposure while it lives.
func TestExposeBrowser(t *testing.T) {
	if _, err := os.Stat("view/node_modules/playwright-core"); err != nil {
		t.Fatalf("the browser's driver is not installed (make e2e-prep: npm ci in e2e/view): %v", err)
	}
	// Room for the browser's connections: the page, its fetch, its
	// WebSocket and its event stream are open at once.
	s := dockerServer(t, "sessions:\n  expose:\n    enabled: true\n    max_connections: 16\n")
	id := s.open(t, "python")
	mustOK(t, s.in(t, id, "python", browserApp, "timeout_seconds", 60))
	a := s.expose(t, map[string]any{"session_id": id, "port": 8000, "name": "page"})
	if a.Error != nil || a.Exposure == nil {
		t.Fatalf("session_expose: %+v", a)
	}
	e := *a.Exposure
	u, _ := url.Parse(e.URL)
	token := u.Query().Get("runbox_token")
	origin := "http://" + u.Host

	t.Run("session_list names the exposure", func(t *testing.T) {
		text, sessions := listSessions(t, s.c)
		x := sessions[id]
		if len(x) != 1 || x[0].ID != e.ID || x[0].URL != e.URL || x[0].BoxPort != 8000 || x[0].Name != "page" {
			t.Fatalf("session %s's exposures: %+v", id, sessions[id])
		}
		if !strings.Contains(text, e.URL) || !strings.Contains(text, e.ID) {
			t.Fatalf("the text does not name it:\n%s", text)
		}
	})

	shot := filepath.Join(t.TempDir(), "preview.png")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "expose.mjs", e.URL, shot)
	cmd.Dir = "view"
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium(t))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("expose.mjs: %v\n%s\n%s", err, out, exitStderr(err))
	}
	var f browserFacts
	if err := json.Unmarshal(out, &f); err != nil {
		t.Fatalf("facts: %v\n%s", err, out)
	}
	t.Logf("browser: %s", out)

	var data struct {
		Answer int
		Cookie string
	}
	if err := json.Unmarshal([]byte(f.Fetch), &data); err != nil || data.Answer != 42 {
		t.Errorf("the page's fetch: %q %v", f.Fetch, err)
	}
	// The follow-up request carried runbox's cookie (it passed) and the
	// app's own, and the app read only its own.
	if data.Cookie != "app=visible" {
		t.Errorf("the app read the cookies %q", data.Cookie)
	}
	if f.WS != "echo: ping from the page" {
		t.Errorf("the WebSocket: %q", f.WS)
	}
	if f.SSE != "one,two,three" {
		t.Errorf("the event stream: %q", f.SSE)
	}
	if f.Title != "made in the box" || f.ShotBytes < 1000 {
		t.Errorf("the page: title %q, a screenshot of %d bytes", f.Title, f.ShotBytes)
	}

	// The token reached the browser once, in the URL, and the page can
	// read it nowhere.
	if f.TokenInPage || strings.Contains(f.Cookie, token) || strings.Contains(f.Href, token) || strings.Contains(f.Referrer, token) {
		t.Errorf("the page read the token: cookie %q href %q referrer %q, in its document or timings: %v", f.Cookie, f.Href, f.Referrer, f.TokenInPage)
	}
	if f.Cookie != "app=visible" || f.Href != origin+"/" || f.FinalURL != origin+"/" {
		t.Errorf("the page's cookie %q and URL %q (final %q), want app=visible and %s/", f.Cookie, f.Href, f.FinalURL, origin)
	}
	if len(f.Navigations) < 2 || f.Navigations[0] != e.URL || f.Navigations[len(f.Navigations)-1] != origin+"/" {
		t.Errorf("navigations: %v", f.Navigations)
	}
	for _, r := range f.Requests {
		if strings.Contains(r, token) && r != "GET "+e.URL {
			t.Errorf("a request past the first carried the token: %s", r)
		}
	}
	var runboxCookie bool
	for _, c := range f.Cookies {
		if c.Name == "runbox_token_"+u.Port() {
			runboxCookie = true
			if !c.HTTPOnly || c.SameSite != "Strict" || c.Path != "/" || !c.IsToken {
				t.Errorf("runbox's cookie: %+v", c)
			}
		} else if c.IsToken {
			t.Errorf("the token in another cookie: %+v", c)
		}
	}
	if !runboxCookie {
		t.Errorf("the browser kept no runbox cookie: %+v", f.Cookies)
	}

	// The browser is gone: its connections close, and the exposure with
	// the session; session_list then names none.
	waitFor(t, 30*time.Second, func() bool {
		l := exposeOn(t, s.c, "session_exposures", map[string]any{"session_id": id})
		return len(l.Exposures) == 1 && l.Exposures[0].Connections == 0
	})
	s.tool(t, "session_close", map[string]any{"session_id": id})
	waitFor(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("the closed session left boxes: %v", left)
	}
}

// sessionExposure is one exposure as session_list names it.
type sessionExposure struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	BoxPort int    `json:"box_port"`
	URL     string `json:"url"`
}

// listSessions calls session_list on c: its text, and each session's
// exposures by session id.
func listSessions(t *testing.T, c *client.Client) (string, map[string][]sessionExposure) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "session_list", map[string]any{}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("session_list: %v %+v", err, res)
	}
	var a struct {
		Sessions []struct {
			ID        string            `json:"session_id"`
			Exposures []sessionExposure `json:"exposures"`
		} `json:"sessions"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("session_list: %v: %s", err, raw)
	}
	out := map[string][]sessionExposure{}
	for _, s := range a.Sessions {
		out[s.ID] = s.Exposures
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	return text, out
}
