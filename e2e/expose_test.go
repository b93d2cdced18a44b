//go:build e2e

package e2e

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/runbox-mcp/runbox/contract"
)

// exposeManifest enables exposures with small caps the tests reach.
const exposeManifest = "sessions:\n  expose:\n    enabled: true\n    max_per_session: 2\n    max_connections: 3\n"

// exposeInfo is session_expose's exposure.
type exposeInfo struct {
	ID          string `json:"id"`
	SessionID   string `json:"session_id"`
	BoxPort     int    `json:"box_port"`
	URL         string `json:"url"`
	Address     string `json:"address"`
	Connections int    `json:"connections"`
}

type exposeAnswer struct {
	Status    string       `json:"status"`
	Exposure  *exposeInfo  `json:"exposure"`
	Exposures []exposeInfo `json:"exposures"`
	Closed    bool         `json:"closed"`
	Error     *struct {
		Kind, Message string
	} `json:"error"`
}

func (s *server) expose(t *testing.T, args map[string]any) exposeAnswer {
	t.Helper()
	return exposeOn(t, s.c, "session_expose", args)
}

// exposeOn calls an exposure tool on c.
func exposeOn(t *testing.T, c *client.Client, name string, args map[string]any) exposeAnswer {
	t.Helper()
	return structuredCall[exposeAnswer](t, c, time.Minute, true, name, args)
}

// previewApp is a web app of the standard library that a session starts
// in a thread: pages that say what they were sent, a 1 MiB download,
// server-sent events held until released, and a WebSocket echo (RFC
// 6455, written here); and beside it `python3 -m http.server` on 8001.
const previewApp = `import threading, http.server, hashlib, base64, struct, os, json, subprocess
release = threading.Event()
BIG = os.urandom(1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def body(self, b, ctype="application/json"):
        self.send_response(200); self.send_header("Content-Type", ctype); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.body(json.dumps({"posted": self.rfile.read(n).decode()}).encode())
    def do_GET(self):
        if self.path == "/sse":
            self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.send_header("Connection", "close"); self.end_headers()
            self.wfile.write(b"data: first\n\n"); self.wfile.flush()
            release.wait(60)
            self.wfile.write(b"data: second\n\n"); self.wfile.flush()
            self.close_connection = True
        elif self.path == "/release":
            release.set(); self.body(b"released", "text/plain")
        elif self.path == "/big":
            self.body(BIG, "application/octet-stream")
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
                self.wfile.write(bytes([128 | op]) + (bytes([n]) if n < 126 else b"\x7e" + struct.pack(">H", n)) + data); self.wfile.flush()
            self.close_connection = True
        else:
            self.body(json.dumps({"path": self.path, "cookie": self.headers.get("Cookie", ""), "host": self.headers.get("Host")}).encode())
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
os.makedirs("site", exist_ok=True)
open("site/index.html", "w").write("<h1>made in the box</h1>\n")
static = subprocess.Popen(["python3", "-m", "http.server", "8001", "--bind", "127.0.0.1", "--directory", "site"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
import time, socket
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", 8001), timeout=1).close(); break
    except OSError:
        time.sleep(0.1)
print(hashlib.sha256(BIG).hexdigest())
`

// TestExpose: a web server a session started is opened from the host
// through session_expose's URL (the token, then its cookie), with
// WebSockets and server-sent events, refused without the token or with
// another Host, capped, closed with the session; the box keeps only lo.
func TestExpose(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}, {"oci", ociServer}, {"podman", podmanServer}, {"kubernetes", kubeServer}} {
		t.Run(b.name, func(t *testing.T) { exposeSession(t, b.start(t, exposeManifest)) })
	}
}

func exposeSession(t *testing.T, s *server) {
	id := s.open(t, "python")
	r := s.in(t, id, "python", previewApp, "timeout_seconds", 60)
	mustOK(t, r)
	bigSum := strings.TrimSpace(r.Stdout)

	a := s.expose(t, map[string]any{"session_id": id, "port": 8000, "name": "app"})
	if a.Error != nil || a.Exposure == nil {
		t.Fatalf("session_expose: %+v", a)
	}
	e := *a.Exposure
	u, err := url.Parse(e.URL)
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") || u.Query().Get("runbox_token") == "" || e.Address != u.Host {
		t.Fatalf("the URL %q (address %s): %v", e.URL, e.Address, err)
	}
	token := u.Query().Get("runbox_token")
	base := "http://" + u.Host

	t.Run("refused without the token, with another, with another Host", func(t *testing.T) {
		for _, c := range []struct {
			name, path, host string
			cookie           *http.Cookie
			want             int
		}{
			{"no token", "/", "", nil, http.StatusUnauthorized},
			{"a wrong token", "/?runbox_token=" + strings.Repeat("A", len(token)), "", nil, http.StatusForbidden},
			{"a wrong cookie", "/", "", &http.Cookie{Name: "runbox_token_" + u.Port(), Value: "guess"}, http.StatusUnauthorized},
			{"a forged Host (DNS rebinding)", "/?runbox_token=" + token, "rebind.example:" + u.Port(), nil, http.StatusMisdirectedRequest},
			{"localhost is not the printed name", "/?runbox_token=" + token, "localhost:" + u.Port(), nil, http.StatusMisdirectedRequest},
		} {
			req, _ := http.NewRequest("GET", base+c.path, nil)
			if c.host != "" {
				req.Host = c.host
			}
			if c.cookie != nil {
				req.AddCookie(c.cookie)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.want || strings.Contains(string(body), "path") || len(res.Cookies()) != 0 {
				t.Errorf("%s: %d %q cookies %v", c.name, res.StatusCode, body, res.Cookies())
			}
		}
	})

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	t.Run("the token becomes a cookie and never reaches the app", func(t *testing.T) {
		res, err := hc.Get(e.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cs := res.Cookies()
		if res.StatusCode != 200 || len(cs) != 1 || cs[0].Value != token || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" ||
			!strings.Contains(string(body), `url=/"`) {
			t.Fatalf("the first visit: %d %q %+v", res.StatusCode, body, cs)
		}
		jar.SetCookies(u, []*http.Cookie{{Name: "app", Value: "kept"}})
		var seen struct{ Path, Cookie, Host string }
		res, err = hc.Get(base + "/page?x=1")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.NewDecoder(res.Body).Decode(&seen); err != nil || res.StatusCode != 200 {
			t.Fatalf("the app's page: %d %v", res.StatusCode, err)
		}
		res.Body.Close()
		if seen.Path != "/page?x=1" || seen.Cookie != "app=kept" || seen.Host != u.Host || strings.Contains(seen.Cookie, token) {
			t.Fatalf("the app read %+v", seen)
		}
		res, err = hc.Post(base+"/form", "text/plain", strings.NewReader("posted body"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if string(body) != `{"posted": "posted body"}` {
			t.Fatalf("POST: %q", body)
		}
		res, err = hc.Get(base + "/big")
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, res.Body)
		res.Body.Close()
		if err != nil || n != 1<<20 || hex.EncodeToString(h.Sum(nil)) != bigSum {
			t.Fatalf("the download: %d bytes, %v", n, err)
		}
	})

	t.Run("server-sent events arrive before the response ends", func(t *testing.T) {
		res, err := hc.Get(base + "/sse")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
			t.Fatalf("the first event: %q %v", line, err)
		}
		// The box holds the rest until released, over another connection.
		rel, err := hc.Get(base + "/release")
		if err != nil {
			t.Fatal(err)
		}
		rel.Body.Close()
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != "\ndata: second\n\n" {
			t.Fatalf("the rest: %q %v", rest, err)
		}
	})

	t.Run("a WebSocket echoes", func(t *testing.T) {
		ck := "runbox_token_" + u.Port() + "=" + token
		c, br, status := wsDial(t, u.Host, ck, "http://"+u.Host)
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("the handshake: %d", status)
		}
		defer c.Close()
		for _, msg := range []string{"hello", strings.Repeat("long message ", 100)} {
			wsWrite(t, c, msg)
			if got := wsRead(t, br); got != msg {
				t.Fatalf("echoed %q, want %q", got, msg)
			}
		}
		// A page of another site cannot open one with the person's cookie.
		c2, _, status := wsDial(t, u.Host, ck, "http://evil.example")
		c2.Close()
		if status != http.StatusForbidden {
			t.Fatalf("a cross-site handshake: %d", status)
		}
	})

	t.Run("python -m http.server", func(t *testing.T) {
		a := s.expose(t, map[string]any{"session_id": id, "port": 8001})
		if a.Error != nil || a.Exposure == nil {
			t.Fatalf("session_expose: %+v", a)
		}
		su, _ := url.Parse(a.Exposure.URL)
		code, body := previewGet(t, a.Exposure.URL, "/index.html")
		if code != 200 || body != "<h1>made in the box</h1>\n" {
			t.Fatalf("the static page: %d %q", code, body)
		}
		// Two per session: a third is refused.
		if a := s.expose(t, map[string]any{"session_id": id, "port": 8002}); a.Error == nil || !strings.Contains(a.Error.Message, "max_per_session") {
			t.Fatalf("a third exposure: %+v", a)
		}
		if a := s.expose(t, map[string]any{"session_id": id, "port": 70000}); a.Error == nil {
			t.Fatalf("port 70000: %+v", a)
		}
		if a := s.expose(t, map[string]any{"session_id": "s_nosuchsession0000000000000000", "port": 8000}); a.Error == nil || a.Error.Kind != "session_not_found" {
			t.Fatalf("another session: %+v", a)
		}
		closed := exposeOn(t, s.c, "session_unexpose", map[string]any{"exposure_id": a.Exposure.ID})
		if !closed.Closed {
			t.Fatalf("session_unexpose: %+v", closed)
		}
		if _, err := net.DialTimeout("tcp", su.Host, 5*time.Second); err == nil {
			t.Fatal("the closed exposure still listens")
		}
	})

	t.Run("a port nothing listens on is a 502", func(t *testing.T) {
		a := s.expose(t, map[string]any{"session_id": id, "port": 8999})
		if a.Error != nil {
			t.Fatalf("%+v", a)
		}
		defer exposeOn(t, s.c, "session_unexpose", map[string]any{"exposure_id": a.Exposure.ID})
		code, body := previewGet(t, a.Exposure.URL, "/")
		if code != http.StatusBadGateway || !strings.Contains(body, "8999") {
			t.Fatalf("%d %q", code, body)
		}
	})

	t.Run("connections past the cap are refused", func(t *testing.T) {
		// The client's idle connections hold slots too: let them go.
		hc.CloseIdleConnections()
		waitFor(t, 10*time.Second, func() bool {
			l := exposeOn(t, s.c, "session_exposures", map[string]any{"session_id": id})
			return len(l.Exposures) == 1 && l.Exposures[0].Connections == 0
		})
		var held []net.Conn
		for range 3 {
			c, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		// The listener accepts in order: the fourth is past the cap.
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("the fourth connection: %v %+v", err, res)
		}
		c.Close()
		for _, c := range held {
			c.Close()
		}
		// Freed again.
		waitFor(t, 10*time.Second, func() bool {
			res, err := hc.Get(base + "/again")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
	})

	t.Run("the box still has only lo", func(t *testing.T) {
		r := s.in(t, id, "python", "import os\nprint(sorted(os.listdir('/sys/class/net')))")
		if mustOK(t, r); r.Stdout != "['lo']\n" {
			t.Fatalf("interfaces: %q", r.Stdout)
		}
	})

	t.Run("everything closes with the session", func(t *testing.T) {
		res, err := hc.Get(base + "/sse")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "data: first\n" {
			t.Fatalf("the first event: %q %v", line, err)
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
		// The stream in flight ends (the release never comes: the box is
		// gone), and the listener with it.
		done := make(chan error, 1)
		go func() { _, err := io.ReadAll(br); done <- err }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the stream in flight outlived its session")
		}
		waitFor(t, 10*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		})
		if a := exposeOn(t, s.c, "session_exposures", map[string]any{}); len(a.Exposures) != 0 {
			t.Fatalf("exposures after the session closed: %+v", a.Exposures)
		}
	})
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("closed sessions left boxes: %v", left)
	}
}

// wsDial opens a WebSocket to host's /ws with cookie and origin; the
// handshake's status, and the connection and its reader when it switched.
// previewGet opens a preview's URL as a person's browser would (a fresh
// cookie jar takes its token), then GETs path on its host: the status and
// the body.
func previewGet(t *testing.T, previewURL, path string) (int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	res, err := hc.Get(previewURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(previewURL)
	res, err = hc.Get("http://" + u.Host + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(body)
}

func wsDial(t *testing.T, host, cookie, origin string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	k := make([]byte, 16)
	_, _ = rand.Read(k)
	key := base64.StdEncoding.EncodeToString(k)
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: %s\r\nCookie: %s\r\n\r\n", host, key, origin, cookie)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		if res.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
			t.Fatalf("the accept key: %v", res.Header)
		}
	}
	return c, br, res.StatusCode
}

// wsWrite sends one masked text frame.
func wsWrite(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	mask := []byte{1, 2, 3, 4}
	frame := []byte{0x81}
	if len(msg) < 126 {
		frame = append(frame, 0x80|byte(len(msg)))
	} else {
		frame = append(frame, 0x80|126, byte(len(msg)>>8), byte(len(msg)))
	}
	frame = append(frame, mask...)
	for i := range len(msg) {
		frame = append(frame, msg[i]^mask[i%4])
	}
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// wsRead reads one unmasked frame's payload.
func wsRead(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	h := make([]byte, 2)
	if _, err := io.ReadFull(br, h); err != nil {
		t.Fatal(err)
	}
	n := int(h[1] & 127)
	if n == 126 {
		ext := make([]byte, 2)
		if _, err := io.ReadFull(br, ext); err != nil {
			t.Fatal(err)
		}
		n = int(ext[0])<<8 | int(ext[1])
	}
	if h[1]&128 != 0 {
		t.Fatal(errors.New("a masked frame from the server"))
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// TestExposuresBoundToTokens: on a team server an exposure belongs to the
// bearer token that made it: another token neither lists it, closes it,
// nor exposes a session of the first's; the URL stays the person's
// capability, and the session's end takes it.
func TestExposuresBoundToTokens(t *testing.T) {
	alice, bob := "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
	t.Setenv("RBX_E2E_ALICE", alice)
	t.Setenv("RBX_E2E_BOB", bob)
	m := writeManifest(t, "audit:\n  enabled: false\nhttp:\n  tokens:\n    - {name: alice, env: RBX_E2E_ALICE}\n    - {name: bob, env: RBX_E2E_BOB}\n"+exposeManifest)
	s := startNetServer(t, "http", "--manifest", m)
	ca, cb := tokenClient(t, s, alice), tokenClient(t, s, bob)

	id := toolOn(t, ca, "session_open", map[string]any{"language": "python"}).Session.ID
	r := callOn(t, ca, map[string]any{"language": "python", "session_id": id, "timeout_seconds": 60,
		"code": "import threading, http.server\nsrv = http.server.ThreadingHTTPServer(('127.0.0.1', 8000), http.server.SimpleHTTPRequestHandler)\nthreading.Thread(target=srv.serve_forever, daemon=True).start()\nopen('hello.txt', 'w').write('alice app')\n"})
	if r.Status != contract.StatusOK {
		t.Fatalf("alice's server: %+v %q", r.Error, r.Stderr)
	}
	a := exposeOn(t, ca, "session_expose", map[string]any{"session_id": id, "port": 8000})
	if a.Error != nil || a.Exposure == nil {
		t.Fatalf("alice's exposure: %+v", a)
	}
	if b := exposeOn(t, cb, "session_expose", map[string]any{"session_id": id, "port": 8000}); b.Error == nil || b.Error.Kind != "session_not_found" {
		t.Fatalf("bob exposed alice's session: %+v", b)
	}
	if b := exposeOn(t, cb, "session_exposures", map[string]any{}); len(b.Exposures) != 0 {
		t.Fatalf("bob lists %+v", b.Exposures)
	}
	if b := exposeOn(t, cb, "session_unexpose", map[string]any{"exposure_id": a.Exposure.ID}); b.Error == nil || b.Closed {
		t.Fatalf("bob closed alice's exposure: %+v", b)
	}
	if l := exposeOn(t, ca, "session_exposures", map[string]any{"session_id": id}); len(l.Exposures) != 1 || l.Exposures[0].ID != a.Exposure.ID {
		t.Fatalf("alice lists %+v", l.Exposures)
	}
	// session_list names it in alice's session, and none in bob's.
	bid := toolOn(t, cb, "session_open", map[string]any{"language": "python"}).Session.ID
	if _, l := listSessions(t, ca); len(l[id]) != 1 || l[id][0].URL != a.Exposure.URL {
		t.Fatalf("alice's session_list: %+v", l)
	}
	if text, l := listSessions(t, cb); len(l) != 1 || len(l[bid]) != 0 || strings.Contains(text, a.Exposure.ID) {
		t.Fatalf("bob's session_list: %+v\n%s", l, text)
	}
	toolOn(t, cb, "session_close", map[string]any{"session_id": bid})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	res, err := hc.Get(a.Exposure.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(a.Exposure.URL)
	res, err = hc.Get("http://" + u.Host + "/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "alice app" {
		t.Fatalf("alice's page: %d %q", res.StatusCode, body)
	}
	toolOn(t, ca, "session_close", map[string]any{"session_id": id})
	hc.CloseIdleConnections()
	waitFor(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}
