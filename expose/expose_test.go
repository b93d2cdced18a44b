package expose

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/manifest"
)

// appBox stands for a session's box: one session of one client whose
// port leads to a real HTTP server on this machine's loopback.
type appBox struct {
	id, client string
	addr       string
	done       chan struct{}
}

func (b *appBox) DialSession(ctx context.Context, id, client string, port int) (net.Conn, error) {
	if id != b.id || client != b.client {
		return nil, errors.New("no such session")
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", b.addr)
}

func (b *appBox) SessionDone(_ context.Context, id, client string) (<-chan struct{}, bool) {
	return b.done, id == b.id && client == b.client
}

// echoApp answers each request with what it read: path, cookies, host.
func echoApp(t *testing.T) (*httptest.Server, *appBox) {
	t.Helper()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s|%s|%s", r.Method, r.URL.RequestURI(), r.Header.Get("Cookie"), r.Host)
	}))
	t.Cleanup(app.Close)
	return app, &appBox{id: "s_1", client: "alice", addr: app.Listener.Addr().String(), done: make(chan struct{})}
}

type records struct {
	mu sync.Mutex
	e  []audit.Entry
}

func (r *records) add(e audit.Entry) {
	r.mu.Lock()
	r.e = append(r.e, e)
	r.mu.Unlock()
}

func (r *records) outcomes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.e {
		out = append(out, e.Exposure.Outcome)
	}
	return out
}

func enabled() manifest.Expose {
	c := manifest.DefaultExpose()
	c.Enabled = true
	return c
}

func get(t *testing.T, c *http.Client, u string, h map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range h {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestOnlyThePersonGetsIn(t *testing.T) {
	_, box := echoApp(t)
	var rec records
	s := New(enabled(), box, nil, rec.add)
	defer s.CloseAll()
	info, err := s.Expose(context.Background(), "s_1", "alice", 8000, "app")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(info.URL)
	token := u.Query().Get(tokenParam)
	base := "http://" + u.Host
	if len(token) < 40 || u.Host != info.Address || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("the URL %s", info.URL)
	}
	plain := &http.Client{}
	for _, c := range []struct {
		name string
		path string
		h    map[string]string
		want int
	}{
		{"no token", "/", nil, 401},
		{"a wrong token", "/?runbox_token=x", nil, 403},
		{"another Host", "/?runbox_token=" + token, map[string]string{"Host": "evil.example:" + u.Port()}, 421},
		{"a proxy request", "/", map[string]string{"Host": u.Host}, 401},
		{"a cookie of another exposure", "/", map[string]string{"Cookie": "runbox_token_1=" + token}, 401},
		{"the cookie from another site", "/", map[string]string{"Cookie": "runbox_token_" + u.Port() + "=" + token, "Sec-Fetch-Site": "same-site"}, 403},
		{"the cookie from another origin", "/", map[string]string{"Cookie": "runbox_token_" + u.Port() + "=" + token, "Origin": "http://127.0.0.1:1"}, 403},
	} {
		if code, body := get(t, plain, base+c.path, c.h); code != c.want || strings.Contains(body, "GET ") {
			t.Errorf("%s: %d %q", c.name, code, body)
		}
	}

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	code, body := get(t, hc, base+"/deep/page?a=1&runbox_token="+token, nil)
	if code != 200 || !strings.Contains(body, `url=/deep/page?a=1"`) {
		t.Fatalf("landing: %d %q", code, body)
	}
	jar.SetCookies(u, []*http.Cookie{{Name: "app", Value: "1"}, {Name: "runbox_token_9", Value: "another exposure's"}})
	code, body = get(t, hc, base+"/deep/page?a=1", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": base})
	if want := "GET /deep/page?a=1|app=1|" + u.Host; code != 200 || body != want {
		t.Fatalf("the app read %d %q, want %q", code, body, want)
	}
	// The URL itself works from anywhere (a link in a chat client).
	if code, _ := get(t, plain, info.URL, map[string]string{"Sec-Fetch-Site": "cross-site"}); code != 200 {
		t.Fatalf("the URL from another site: %d", code)
	}
	hc.CloseIdleConnections()
	plain.CloseIdleConnections()
	// The seven refused, and the person's (both clients share
	// http.DefaultTransport's connections).
	waitUntil(t, func() bool { return len(rec.outcomes()) >= 8 && s.List("alice", "")[0].Connections == 0 })
	out := strings.Join(rec.outcomes(), "\n")
	for _, want := range []string{"refused: this preview answers only to Host", "refused: the URL's token is not this preview's",
		"refused: a request from another site", "refused: a request from another origin", "served"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit: no %q in\n%s", want, out)
		}
	}
	rec.mu.Lock()
	for _, e := range rec.e {
		if e.Client.Principal != "alice" || e.Exposure.ID != info.ID || e.Exposure.BoxPort != 8000 || !strings.HasPrefix(e.RunID, info.ID+".") {
			t.Errorf("audit entry %+v %+v", e, e.Exposure)
		}
		if strings.Contains(fmt.Sprint(e), token) {
			t.Errorf("the token in the audit log: %+v", e)
		}
	}
	rec.mu.Unlock()
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("not in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAHeadPast64KiBIsRefused(t *testing.T) {
	_, box := echoApp(t)
	s := New(enabled(), box, nil, nil)
	defer s.CloseAll()
	info, _ := s.Expose(context.Background(), "s_1", "alice", 8000, "")
	c, err := net.Dial("tcp", info.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n\r\n", info.Address, strings.Repeat("a", 100<<10))
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestExposuresAreTheirClients(t *testing.T) {
	_, box := echoApp(t)
	s := New(enabled(), box, nil, nil)
	defer s.CloseAll()
	ctx := context.Background()
	info, err := s.Expose(ctx, "s_1", "alice", 8000, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expose(ctx, "s_1", "bob", 8000, ""); !errors.Is(err, ErrNoSession) {
		t.Fatalf("bob exposes alice's session: %v", err)
	}
	if l := s.List("bob", ""); len(l) != 0 {
		t.Fatalf("bob lists %+v", l)
	}
	if err := s.Close("bob", info.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob closes alice's: %v", err)
	}
	if l := s.List("alice", "s_1"); len(l) != 1 || l[0].ID != info.ID {
		t.Fatalf("alice lists %+v", l)
	}
	if _, err := s.Expose(ctx, "s_1", "alice", 0, ""); err == nil {
		t.Fatal("port 0 exposed")
	}
	if _, err := New(manifest.DefaultExpose(), box, nil, nil).Expose(ctx, "s_1", "alice", 8000, ""); !errors.Is(err, ErrOff) {
		t.Fatalf("off by default: %v", err)
	}
}

func TestCaps(t *testing.T) {
	_, box := echoApp(t)
	cfg := enabled()
	cfg.MaxPerSession, cfg.MaxConnections = 2, 2
	s := New(cfg, box, nil, nil)
	defer s.CloseAll()
	ctx := context.Background()
	info, _ := s.Expose(ctx, "s_1", "alice", 8000, "")
	if _, err := s.Expose(ctx, "s_1", "alice", 8001, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expose(ctx, "s_1", "alice", 8002, ""); err == nil || !strings.Contains(err.Error(), "max_per_session") {
		t.Fatalf("a third exposure: %v", err)
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", info.Address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	c, err := net.Dial("tcp", info.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("past the cap: %v %+v", err, res)
	}
}

// A session's end closes its exposures: the listeners, the connections
// in flight, and every goroutine they had.
func TestClosedWithTheSession(t *testing.T) {
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer app.Close()
	defer close(release)
	before := runtime.NumGoroutine()
	box := &appBox{id: "s_1", client: "alice", addr: app.Listener.Addr().String(), done: make(chan struct{})}
	s := New(enabled(), box, nil, nil)
	info, _ := s.Expose(context.Background(), "s_1", "alice", 8000, "")
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	get(t, hc, info.URL, nil)
	res, err := hc.Get("http://" + info.Address + "/events")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	if line, _ := br.ReadString('\n'); line != "data: first\n" {
		t.Fatalf("the first event: %q", line)
	}
	if e, c := s.Open(); e != 1 || c != 1 {
		t.Fatalf("open: %d exposures, %d connections", e, c)
	}
	close(box.done)
	if _, err := io.ReadAll(br); err == nil {
		// Either way the stream ended; an error is a cut connection.
		t.Log("the stream ended cleanly")
	}
	res.Body.Close()
	waitUntil(t, func() bool { e, _ := s.Open(); return e == 0 })
	if _, err := net.Dial("tcp", info.Address); err == nil {
		t.Fatal("the listener outlived its session")
	}
	hc.CloseIdleConnections()
	app.CloseClientConnections()
	waitUntil(t, func() bool { return runtime.NumGoroutine() <= before })
}

// An answer streams for as long as the box sends it: the wait for a
// request's head does not cut it, and a person who half-closes still
// reads the whole answer.
func TestLongAnswersAreNotCut(t *testing.T) {
	defer func(w time.Duration) { headWait = w }(headWait)
	headWait = 200 * time.Millisecond
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 5 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond)
		}
	}))
	defer app.Close()
	box := &appBox{id: "s_1", client: "alice", addr: app.Listener.Addr().String(), done: make(chan struct{})}
	s := New(enabled(), box, nil, nil)
	defer s.CloseAll()
	info, _ := s.Expose(context.Background(), "s_1", "alice", 8000, "")
	u, _ := url.Parse(info.URL)
	c, err := net.Dial("tcp", info.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /events HTTP/1.1\r\nHost: %s\r\nCookie: runbox_token_%s=%s\r\n\r\n", info.Address, u.Port(), u.Query().Get(tokenParam))
	// Read with the connection left open, as a browser does...
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), "data: 4\n\n") {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("cut after %q: %v", got, err)
		}
		got = append(got, buf[:n]...)
	}
	// ...and again after the person half-closes: the answer is whole.
	c2, err := net.Dial("tcp", info.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "GET /events HTTP/1.1\r\nHost: %s\r\nCookie: runbox_token_%s=%s\r\n\r\n", info.Address, u.Port(), u.Query().Get(tokenParam))
	_ = c2.(*net.TCPConn).CloseWrite()
	all, err := io.ReadAll(c2)
	if err != nil || !strings.Contains(string(all), "data: 0\n\n") || !strings.Contains(string(all), "data: 4\n\n") {
		t.Fatalf("after a half-close: %v %q", err, all)
	}
}

// A box server that never answers, one that closes mid-answer, and a
// thousand connections at once past the cap: each ends cleanly, and
// nothing is left (connections, goroutines).
func TestHostileBoxesLeaveNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path == "/cut" {
					fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly part")
					return
				}
				_, _ = io.Copy(io.Discard, br) // never answers
			}()
		}
	}()
	box := &appBox{id: "s_1", client: "alice", addr: ln.Addr().String(), done: make(chan struct{})}
	cfg := enabled()
	cfg.MaxConnections = 3
	s := New(cfg, box, nil, nil)
	info, _ := s.Expose(context.Background(), "s_1", "alice", 8000, "")
	u, _ := url.Parse(info.URL)
	cookie := "runbox_token_" + u.Port() + "=" + u.Query().Get(tokenParam)
	ask := func(path string) net.Conn {
		c, err := net.Dial("tcp", info.Address)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n", path, info.Address, cookie)
		return c
	}

	cut := ask("/cut")
	res, err := http.ReadResponse(bufio.NewReader(cut), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(res.Body); err == nil || string(b) != "only part" {
		t.Fatalf("a cut answer: %q %v", b, err)
	}
	cut.Close()

	silent := ask("/silent")
	waitUntil(t, func() bool { _, c := s.Open(); return c == 1 })

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", info.Address)
			if err != nil {
				mu.Lock()
				statuses[-1]++
				mu.Unlock()
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", info.Address)
			code := 0
			if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				code = res.StatusCode
			}
			mu.Lock()
			statuses[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Without the token each is refused at once, or past the cap.
	if statuses[http.StatusUnauthorized]+statuses[http.StatusServiceUnavailable] < 990 {
		t.Fatalf("statuses %v", statuses)
	}
	silent.Close()
	waitUntil(t, func() bool { _, c := s.Open(); return c == 0 })
	close(box.done)
	waitUntil(t, func() bool { e, _ := s.Open(); return e == 0 })
	ln.Close()
	waitUntil(t, func() bool { return runtime.NumGoroutine() <= before })
}

// TestAnswerWithinBound: a box server that takes a request and never
// answers gets a 504 after answer_within_seconds and its stream closed;
// an answer once begun may pause past the bound, and a kept-alive
// connection may idle past it between requests; an answer held quiet for
// a person who left ends within the bound.
func TestAnswerWithinBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					switch req.URL.Path {
					case "/silent":
						_, _ = io.Copy(io.Discard, br)
						return
					case "/quiet":
						// Quiet even after the person's end: only runbox
						// closing the stream ends it.
						fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nbe")
						_, _ = io.Copy(io.Discard, br)
						<-quit
						return
					case "/pause":
						fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nbe")
						time.Sleep(1500 * time.Millisecond)
						fmt.Fprint(c, "fore")
					default:
						fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					}
				}
			}()
		}
	}()
	box := &appBox{id: "s_1", client: "alice", addr: ln.Addr().String(), done: make(chan struct{})}
	cfg := enabled()
	cfg.AnswerWithinSeconds = 1
	var rec records
	s := New(cfg, box, nil, rec.add)
	info, err := s.Expose(context.Background(), "s_1", "alice", 8000, "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(info.URL)
	cookie := "runbox_token_" + u.Port() + "=" + u.Query().Get(tokenParam)
	c, err := net.Dial("tcp", info.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	ask := func(path string) (int, string, error) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n", path, info.Address, cookie)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, "", err
		}
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	if code, body, err := ask("/pause"); code != 200 || body != "before" || err != nil {
		t.Fatalf("an answer that pauses: %d %q %v", code, body, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if code, body, err := ask("/"); code != 200 || body != "ok" || err != nil {
		t.Fatalf("after an idle pause: %d %q %v", code, body, err)
	}
	t0 := time.Now()
	code, body, err := ask("/silent")
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "answer_within_seconds") || err != nil {
		t.Fatalf("a silent box: %d %q %v", code, body, err)
	}
	if d := time.Since(t0); d < time.Second {
		t.Fatalf("504 after %s, before the bound", d)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection outlived the 504")
	}
	waitUntil(t, func() bool { _, c, st := s.ExposureCounts(); return c == 0 && st == 0 })
	waitUntil(t, func() bool {
		o := rec.outcomes()
		return len(o) == 1 && o[0] == "box: no answer within 1s"
	})

	// A person who leaves an answer the box holds quiet frees its
	// connection and stream within the bound.
	q, err := net.Dial("tcp", info.Address)
	if err != nil {
		t.Fatal(err)
	}
	_ = q.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(q, "GET /quiet HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n", info.Address, cookie)
	qr := bufio.NewReader(q)
	if res, err := http.ReadResponse(qr, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("a quiet answer: %v", err)
	}
	waitUntil(t, func() bool { _, c, st := s.ExposureCounts(); return c == 1 && st == 1 })
	q.Close()
	waitUntil(t, func() bool { _, c, st := s.ExposureCounts(); return c == 0 && st == 0 })
	close(box.done)
	waitUntil(t, func() bool { e, _ := s.Open(); return e == 0 })
}
