//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// hostileApp is a box's web server for the hostile cases: /hold answers
// its first byte and holds the rest until /release; /quiet does so for
// ten minutes; /silent takes the request and never answers; /cut promises 10 MiB and closes after
// 1 MiB; /endless streams until the connection breaks; /count says how
// many requests reached / (the flood's path).
const hostileApp = `import threading, http.server, json, os
release = threading.Event()
root = [0]
lock = threading.Lock()
MIB = os.urandom(1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def head(self, n):
        self.send_response(200); self.send_header("Content-Type", "application/octet-stream"); self.send_header("Content-Length", str(n)); self.end_headers()
    def do_GET(self):
        if self.path == "/hold":
            self.head(2); self.wfile.write(b"h"); self.wfile.flush()
            release.wait(300); self.wfile.write(b"i")
        elif self.path == "/release":
            release.set(); self.head(2); self.wfile.write(b"ok")
        elif self.path == "/silent":
            threading.Event().wait(600)
        elif self.path == "/quiet":
            self.head(2); self.wfile.write(b"h"); self.wfile.flush()
            threading.Event().wait(600)
        elif self.path == "/cut":
            self.head(10 << 20); self.wfile.write(MIB); self.wfile.flush()
            self.connection.close(); self.close_connection = True
        elif self.path == "/endless":
            self.head(1 << 40)
            try:
                while True: self.wfile.write(MIB)
            except OSError:
                self.close_connection = True
        elif self.path == "/count":
            b = json.dumps({"root": root[0]}).encode(); self.head(len(b)); self.wfile.write(b)
        else:
            with lock: root[0] += 1
            self.head(4); self.wfile.write(b"root")
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
`

// TestExposeHostile: what a hostile or broken person or box does to an
// exposure leaves nothing behind. A thousand connections past the cap
// are refused 503 while the app sees none of them and the server answers
// calls; a box server that never answers is a 504 within
// answer_within_seconds, and answers held quiet for people who left give
// their slots back within it; a box that closes mid-answer ends the person's
// download; closing the session ends a download in flight and the
// listener. After each case /metrics counts no connection and no stream
// into the box open, and at the end no exposure and no more goroutines
// than before the session (within a margin far below one per connection).
func TestExposeHostile(t *testing.T) {
	for _, b := range []struct{ name, isolation string }{{"docker", ""}, {"gvisor", "isolation: gvisor\n"}} {
		t.Run(b.name, func(t *testing.T) { exposeHostile(t, b.isolation) })
	}
}

func exposeHostile(t *testing.T, isolation string) {
	maddr := freeAddr(t)
	const maxConns, answerWithin = 8, 3
	m := writeManifest(t, fmt.Sprintf("%saudit:\n  enabled: false\nmetrics:\n  listen: %s\nsessions:\n  expose:\n    enabled: true\n    max_connections: %d\n    answer_within_seconds: %d\n",
		isolation, maddr, maxConns, answerWithin))
	s := startNetServer(t, "http", "--manifest", m)
	pid := strconv.Itoa(s.cmd.Process.Pid)
	c := s.client(t, "http")
	metric := func(name string) float64 {
		t.Helper()
		for _, line := range strings.Split(get(t, "http://"+maddr+"/metrics", "", http.StatusOK), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		t.Fatalf("/metrics has no %s", name)
		return 0
	}
	// nothingOpen waits for the exposures' connections and streams to
	// close.
	nothingOpen := func(t *testing.T) {
		t.Helper()
		waitFor(t, 30*time.Second, func() bool {
			return metric("runbox_exposure_connections_open") == 0 && metric("runbox_exposure_streams_open") == 0
		})
	}
	goroutines := metric("go_goroutines")

	id := toolOn(t, c, "session_open", map[string]any{"language": "python"}).Session.ID
	if r := callOn(t, c, map[string]any{"language": "python", "session_id": id, "code": hostileApp, "timeout_seconds": 60}); r.Status != contract.StatusOK {
		t.Fatalf("the app: %+v %q", r.Error, r.Stderr)
	}
	a := exposeOn(t, c, "session_expose", map[string]any{"session_id": id, "port": 8000})
	if a.Error != nil || a.Exposure == nil {
		t.Fatalf("session_expose: %+v", a)
	}
	u, _ := url.Parse(a.Exposure.URL)
	host := u.Host
	cookie := "runbox_token_" + u.Port() + "=" + u.Query().Get("runbox_token")
	if metric("runbox_exposures_open") != 1 {
		t.Fatal("/metrics does not count the exposure")
	}

	t.Run("a thousand connections past the cap", func(t *testing.T) {
		var held []*bufio.Reader
		for range maxConns {
			conn, br := ask(t, host, cookie, "/hold")
			defer conn.Close()
			res, err := http.ReadResponse(br, nil)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("a held answer: %v %+v", err, res)
			}
			if b, err := br.ReadByte(); err != nil || b != 'h' {
				t.Fatalf("a held answer's first byte: %q %v", b, err)
			}
			held = append(held, br)
		}
		if n := metric("runbox_exposure_streams_open"); n != maxConns {
			t.Fatalf("%v streams open, want %d", n, maxConns)
		}
		// The flood, and beside it a call in the same session.
		called := make(chan contract.Result, 1)
		go func() {
			called <- callOn(t, c, map[string]any{"language": "python", "session_id": id, "code": "print(6 * 7)"})
		}()
		var wg sync.WaitGroup
		var mu sync.Mutex
		outcomes := map[string]int{}
		for range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outcome := floodOne(host, cookie)
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("the flood: %v", outcomes)
		// A connection the kernel resets before runbox accepts it is
		// refused too; anything else (an answer from the app, a hang)
		// is not.
		if outcomes["503"] < 990 || outcomes["503"]+outcomes["reset"] != 1000 {
			t.Fatalf("the flood: %v", outcomes)
		}
		select {
		case r := <-called:
			if r.Status != contract.StatusOK || r.Stdout != "42\n" {
				t.Fatalf("the call beside the flood: %+v", r)
			}
		case <-time.After(3 * time.Minute):
			t.Fatal("the call beside the flood did not answer")
		}
		// The held answers were never cut, and end when released. The
		// cap is full, and a held answer keeps its slot until it ends
		// (a person who half-closes still gets the whole answer): the
		// release goes through a second exposure of the same port.
		a2 := exposeOn(t, c, "session_expose", map[string]any{"session_id": id, "port": 8000})
		if a2.Error != nil || a2.Exposure == nil {
			t.Fatalf("a second exposure: %+v", a2)
		}
		u2, _ := url.Parse(a2.Exposure.URL)
		cookie2 := "runbox_token_" + u2.Port() + "=" + u2.Query().Get("runbox_token")
		if code, body := askAll(t, u2.Host, cookie2, "/release"); code != 200 || body != "ok" {
			t.Fatalf("the release: %d %q", code, body)
		}
		for _, br := range held {
			if b, err := br.ReadByte(); err != nil || b != 'i' {
				t.Fatalf("a held answer's rest: %q %v", b, err)
			}
		}
		code, body := askAll(t, u2.Host, cookie2, "/count")
		var n struct{ Root int }
		if err := json.Unmarshal([]byte(body), &n); code != 200 || err != nil || n.Root != 0 {
			t.Fatalf("the app saw %d flood requests (%d %q)", n.Root, code, body)
		}
		if closed := exposeOn(t, c, "session_unexpose", map[string]any{"exposure_id": a2.Exposure.ID}); !closed.Closed {
			t.Fatalf("session_unexpose: %+v", closed)
		}
	})
	nothingOpen(t)
	if code, body := askAll(t, host, cookie, "/"); code != 200 || body != "root" {
		t.Fatalf("after the flood: %d %q", code, body)
	}
	nothingOpen(t)

	t.Run("a box server that never answers", func(t *testing.T) {
		t0 := time.Now()
		code, body := askAll(t, host, cookie, "/silent")
		if code != http.StatusGatewayTimeout || !strings.Contains(body, "answer_within_seconds") {
			t.Fatalf("%d %q", code, body)
		}
		if d := time.Since(t0); d < answerWithin*time.Second {
			t.Fatalf("504 after %s, before the bound", d)
		}
	})
	nothingOpen(t)

	t.Run("people who leave answers held quiet", func(t *testing.T) {
		var conns []net.Conn
		for range maxConns {
			conn, br := ask(t, host, cookie, "/quiet")
			defer conn.Close()
			res, err := http.ReadResponse(br, nil)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("a quiet answer: %v %+v", err, res)
			}
			if b, err := br.ReadByte(); err != nil || b != 'h' {
				t.Fatalf("a quiet answer's first byte: %q %v", b, err)
			}
			conns = append(conns, conn)
		}
		for _, conn := range conns {
			conn.Close()
		}
		// Their slots come back within the bound on the box's silences.
		nothingOpen(t)
		if code, body := askAll(t, host, cookie, "/"); code != 200 || body != "root" {
			t.Fatalf("after they left: %d %q", code, body)
		}
	})
	nothingOpen(t)

	t.Run("a box that closes mid-answer", func(t *testing.T) {
		conn, br := ask(t, host, cookie, "/cut")
		defer conn.Close()
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%v %+v", err, res)
		}
		n, err := io.Copy(io.Discard, res.Body)
		var ne net.Error
		if n != 1<<20 || !errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("read %d bytes of the cut answer, then %v", n, err)
		}
	})
	nothingOpen(t)

	t.Run("the session closes during a download", func(t *testing.T) {
		conn, br := ask(t, host, cookie, "/endless")
		defer conn.Close()
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%v %+v", err, res)
		}
		if _, err := io.CopyN(io.Discard, res.Body, 4<<20); err != nil {
			t.Fatalf("the download: %v", err)
		}
		toolOn(t, c, "session_close", map[string]any{"session_id": id})
		n, err := io.Copy(io.Discard, res.Body)
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the download after the session closed: %d more bytes, then %v", n, err)
		}
		waitFor(t, 30*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", host, 5*time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		})
	})
	nothingOpen(t)
	if n := metric("runbox_exposures_open"); n != 0 {
		t.Fatalf("%v exposures open after the session closed", n)
	}
	// Not one goroutine per connection of the flood, nor per stream, is
	// left: the margin is the server's own idle connections (the
	// engine's client, the MCP session).
	var now float64
	waitFor(t, 30*time.Second, func() bool { now = metric("go_goroutines"); return now <= goroutines+10 })
	t.Logf("goroutines: %v before the session, %v after", goroutines, now)
	waitFor(t, 60*time.Second, func() bool {
		return len(engineBoxes(t, "", pid, "label="+sandbox.LabelSession)) == 0
	})
}

// ask sends a GET of path with the exposure's cookie on a new connection
// bounded by a minute.
func ask(t *testing.T, host, cookie, path string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n", path, host, cookie)
	return conn, bufio.NewReader(conn)
}

// askAll is ask's whole answer: its status and body.
func askAll(t *testing.T, host, cookie, path string) (int, string) {
	t.Helper()
	conn, br := ask(t, host, cookie, path)
	defer conn.Close()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode, string(b)
}

// floodOne is one connection of the flood: "503" and the like for an
// answer, "reset" for a connection refused or reset, "hang" when nothing
// came within a minute.
func floodOne(host, cookie string) string {
	conn, err := net.DialTimeout("tcp", host, time.Minute)
	if err != nil {
		return "reset"
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n", host, cookie); err != nil {
		return "reset"
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "hang"
	case err != nil:
		return "reset"
	}
	res.Body.Close()
	return strconv.Itoa(res.StatusCode)
}
