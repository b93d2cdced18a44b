//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// The soak's shape: 20 clients on 5 tokens, and one hostile client on a
// token of its own.
const (
	soakTokens  = 5
	soakClients = 20
	// soakDefault is the soak's length when RUNBOX_SOAK is set but is no
	// duration.
	soakDefault = 30 * time.Minute
	// soakMax bounds what RUNBOX_SOAK may ask for.
	soakMax = 4 * time.Hour
)

// Flat, for the soak, is the last quarter's median within these of the
// first quarter's after warm-up (medians, so that one sample taken at a
// burst of calls decides nothing). The RSS of a Go server moves with the
// calls in flight (each holds its answer's output and the box's channel
// buffers, MiBs), with GC cycles (GOGC=100 lets the heap reach twice the
// live data before a collection) and with the scavenger's slow return of
// freed pages (in a 5-minute soak, medians of 50 and 51 MiB, peaks 3 MiB
// above); 20% or 24 MiB covers that and still catches a leak of 4 KiB a
// call in a 30-minute soak (some 6 000 calls between the two quarters at
// the pace of 20 clients). Descriptors move
// with connections and boxes in flight (a client's connection, a box's
// attach stream and engine connection, an upstream call's pipes): 16 or
// 25% covers the calls in flight, and a descriptor leaked per call or per
// refused connection shows as hundreds.
const (
	soakRSSSlackKiB   = 24 * 1024
	soakRSSSlackRatio = 0.20
	soakFDSlack       = 16
	soakFDSlackRatio  = 0.25
)

// soakDuration is RUNBOX_SOAK as a duration (soakDefault when it is set
// but no duration), or skips the test when it is not set.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("RUNBOX_SOAK")
	if v == "" {
		t.Skip("the soak runs only with RUNBOX_SOAK set to its length (e.g. RUNBOX_SOAK=30m; make soak)")
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		d = soakDefault
	}
	if d > soakMax {
		t.Fatalf("RUNBOX_SOAK=%s: at most %s", v, soakMax)
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < d+10*time.Minute {
		t.Fatalf("RUNBOX_SOAK=%s needs go test -timeout of at least %s", v, d+10*time.Minute)
	}
	return d
}

// soakStats counts the soak's calls by kind.
type soakStats struct {
	mu     sync.Mutex
	calls  map[string]int
	errs   map[string]int
	took   map[string][]time.Duration
	failed []string
}

func (s *soakStats) add(kind string, took time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[kind]++
	s.took[kind] = append(s.took[kind], took)
	if err != nil {
		s.errs[kind]++
		if len(s.failed) < 20 {
			s.failed = append(s.failed, kind+": "+err.Error())
		}
	}
}

// soakSample is the server's memory and descriptors at one time.
type soakSample struct {
	at      time.Duration
	rssKiB  int
	fds     int
	running int
}

// soakOwned is what the clients made, by token: the hostile client aims
// at it, and each client checks it sees only its token's.
type soakOwned struct {
	mu    sync.Mutex
	uris  []string       // resources of the clients' runs
	runs  []string       // run ids
	owner map[string]int // every session opened, by its token
	open  map[string]bool
}

func (o *soakOwned) addRun(id, uri string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runs = append(o.runs[max(0, len(o.runs)-200):], id)
	if uri != "" {
		o.uris = append(o.uris[max(0, len(o.uris)-200):], uri)
	}
}

func (o *soakOwned) session(token int, id string, open bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owner[id] = token
	if open {
		o.open[id] = true
	} else {
		delete(o.open, id)
	}
}

// otherTokens reports whether session id was opened by a token not token.
func (o *soakOwned) otherTokens(token int, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.owner[id]
	return ok && owner != token
}

// anySession is one open session of any token, or "".
func (o *soakOwned) anySession() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id := range o.open {
		return id
	}
	return ""
}

func (o *soakOwned) pick(n int) (uri, run string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.uris) > 0 {
		uri = o.uris[n%len(o.uris)]
	}
	if len(o.runs) > 0 {
		run = o.runs[n%len(o.runs)]
	}
	return uri, run
}

// TestSoak runs a team server for RUNBOX_SOAK (make soak): 20 clients on 5
// tokens (streamable HTTP, protocol 2026-07-28) make one-off runs,
// sessions of several cells, long runs collected with run_wait, tool
// calls to an upstream server and requests to a declared endpoint, while
// a hostile client does what the listener's defects let one do: cancels
// for small request ids, reads of other tokens' runs, their run_wait and
// sessions, dripped unauthenticated bodies, oversized bodies, idle
// connections. Every call must answer with its own right result, no
// client may see another token's runs or sessions, the hostile client
// must never succeed, the server's RSS and open descriptors must stay
// flat, and no box may be left. It ends with a table of what it did.
// All its traffic is to 127.0.0.1.
func TestSoak(t *testing.T) {
	d := soakDuration(t)

	// The declared endpoint.
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "endpoint %s", r.URL.Path)
	}))
	t.Cleanup(endpoint.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(endpoint.URL, "http://"))

	tokens := make([]string, soakTokens)
	y := "audit:\n  enabled: false\nconcurrency: 6\nqueue_size: 64\n" +
		"limits:\n  answer_within_seconds: 2\n  max_background_runs: 32\n  max_background_runs_per_client: 8\n" +
		"sessions:\n  max_per_client: 8\n  max_open: 32\n" +
		"http:\n  max_request_bytes: 1MiB\n  max_connections_per_address: 256\n  tokens:\n"
	for i := range tokens {
		tokens[i] = fmt.Sprintf("soak-token-%d-0123456789abcdef", i)
		env := fmt.Sprintf("RBX_SOAK_T%d", i)
		t.Setenv(env, tokens[i])
		y += fmt.Sprintf("    - {name: team%d, env: %s}\n", i, env)
	}
	const mallory = "soak-mallory-0123456789abcdef"
	t.Setenv("RBX_SOAK_MALLORY", mallory)
	y += "    - {name: mallory, env: RBX_SOAK_MALLORY}\n"
	y += "servers:\n  - name: fake\n    command: " + upstreamFake(t) + "\n"
	y += "network:\n  allow:\n    - host: 127.0.0.1\n      ports: [" + port + "]\n"
	s := startNetServer(t, "http", "--manifest", writeManifest(t, y+imageLanguages(t)))
	pid := s.cmd.Process.Pid

	stats := &soakStats{calls: map[string]int{}, errs: map[string]int{}, took: map[string][]time.Duration{}}
	owned := &soakOwned{owner: map[string]int{}, open: map[string]bool{}}
	var crossToken, hostileWon atomic.Int64
	var crossMu sync.Mutex
	var crossSeen []string
	cross := func(format string, args ...any) {
		crossToken.Add(1)
		crossMu.Lock()
		defer crossMu.Unlock()
		if len(crossSeen) < 20 {
			crossSeen = append(crossSeen, fmt.Sprintf(format, args...))
		}
	}
	won := func(format string, args ...any) {
		hostileWon.Add(1)
		cross("hostile: "+format, args...)
	}

	start := time.Now()
	stop := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(context.Background(), stop)
	defer cancel()

	// The sampler.
	var samples []soakSample
	var sampling sync.WaitGroup
	sampling.Go(func() {
		tick := time.NewTicker(soakSampleEvery(d))
		defer tick.Stop()
		for {
			samples = append(samples, soakSample{at: time.Since(start), rssKiB: soakRSS(pid), fds: openFDs(pid),
				running: len(boxes("label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(pid)))})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})

	var clients sync.WaitGroup
	for c := range soakClients {
		token := c % soakTokens
		cl := tokenClient(t, s, tokens[token])
		clients.Go(func() {
			w := soakClient{c: cl, id: c, token: token, stats: stats, owned: owned, cross: cross, endpoint: "http://127.0.0.1:" + port}
			for n := 0; ctx.Err() == nil; n++ {
				w.step(n)
				select { // pace: 1-2 s between calls
				case <-ctx.Done():
				case <-time.After(time.Second + time.Duration((c*7+n*13)%10)*100*time.Millisecond):
				}
			}
		})
	}
	hostile := &soakHostile{t: t, s: s, c: tokenClient(t, s, mallory), token: mallory, owned: owned, stats: stats, won: won}
	clients.Go(func() {
		for n := 0; ctx.Err() == nil; n++ {
			hostile.step(ctx, n)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	})
	clients.Wait()
	cancel()
	sampling.Wait()
	hostile.bg.Wait()

	// The server after the load: no box of it left, idle descriptors.
	ofServer := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(pid)
	left := waitNoBoxes(60*time.Second, ofServer)
	end := soakSample{at: time.Since(start), rssKiB: soakRSS(pid), fds: openFDs(pid), running: len(left)}

	t.Log("\n" + soakTable(d, stats, samples, end, crossToken.Load(), hostileWon.Load()))
	for _, f := range stats.failed {
		t.Errorf("lost or wrong call: %s", f)
	}
	for _, c := range crossSeen {
		t.Errorf("cross-token: %s", c)
	}
	if len(left) > 0 {
		t.Errorf("boxes left after the soak: %v", left)
	}
	soakFlat(t, samples, d)
}

// soakClient is one of the team's clients: each step is one kind of work,
// in turn.
type soakClient struct {
	c        *client.Client
	id       int
	token    int
	stats    *soakStats
	owned    *soakOwned
	cross    func(string, ...any)
	endpoint string
}

var soakKinds = []string{"one-off", "session", "long", "tool call", "network"}

func (w *soakClient) step(n int) {
	kind := soakKinds[(w.id+n)%len(soakKinds)]
	tag := fmt.Sprintf("c%d-%d", w.id, n)
	start := time.Now()
	var err error
	switch kind {
	case "one-off":
		err = w.oneOff(tag, n)
	case "session":
		err = w.session(tag, n)
	case "long":
		err = w.long(tag)
	case "tool call":
		err = w.expect(map[string]any{"language": "python", "code": "import runbox_tools as tools\nprint(tools.fake.echo(text=" + strconv.Quote(tag) + "))"}, tag+"\n")
	case "network":
		err = w.expect(map[string]any{"language": "python", "timeout_seconds": 30, "code": "import urllib.request\nprint(urllib.request.urlopen(" +
			strconv.Quote(w.endpoint+"/"+tag) + ", timeout=20).read().decode())"}, "endpoint /"+tag+"\n")
	}
	w.stats.add(kind, time.Since(start), err)
}

// tool calls one of runbox's tools and decodes its structured answer.
func (w *soakClient) tool(name string, args map[string]any, into any) error {
	return toolInto(context.Background(), w.c, name, args, into)
}

// toolInto calls one of runbox's tools on c within 3 minutes and decodes
// its structured answer into into.
func toolInto(ctx context.Context, c *client.Client, name string, args map[string]any, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	return json.Unmarshal(raw, into)
}

// run calls run_code and, when it answers running (a loaded machine can
// make any run outlast answer_within_seconds), collects it with run_wait.
func (w *soakClient) run(args map[string]any) (contract.Result, error) {
	var r contract.Result
	if err := w.tool("run_code", args, &r); err != nil {
		return r, err
	}
	return r, w.collect(&r)
}

// collect waits with run_wait for a run that answered running.
func (w *soakClient) collect(r *contract.Result) error {
	for r.Status == contract.StatusRunning {
		if err := w.tool("run_wait", map[string]any{"run_id": r.RunID, "wait_seconds": 30}, r); err != nil {
			return err
		}
	}
	return nil
}

// expect runs args and wants stdout want.
func (w *soakClient) expect(args map[string]any, want string) error {
	r, err := w.run(args)
	if err != nil {
		return err
	}
	w.owned.addRun(r.RunID, "")
	if r.Status != contract.StatusOK || r.Stdout != want {
		return fmt.Errorf("want %q, got %s %q %+v", want, r.Status, r.Stdout, r.Error)
	}
	return nil
}

// oneOff runs a program that prints and writes a file, then reads the
// file back as its resource.
func (w *soakClient) oneOff(tag string, n int) error {
	r, err := w.run(map[string]any{"language": "python", "code": fmt.Sprintf("open('out.txt', 'w').write(%q)\nprint(%d * 7)", tag, n)})
	if err != nil {
		return err
	}
	if r.Status != contract.StatusOK || r.Stdout != strconv.Itoa(n*7)+"\n" || len(r.Artifacts) != 1 {
		return fmt.Errorf("got %s %q %+v artifacts %+v", r.Status, r.Stdout, r.Error, r.Artifacts)
	}
	w.owned.addRun(r.RunID, r.Artifacts[0].URI)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = r.Artifacts[0].URI
	res, err := w.c.ReadResource(ctx, req)
	if err != nil {
		return fmt.Errorf("reading its own %s: %w", req.Params.URI, err)
	}
	if raw, _ := json.Marshal(res.Contents); !strings.Contains(string(raw), tag) {
		return fmt.Errorf("its own %s: %.200s", req.Params.URI, raw)
	}
	return nil
}

// session opens a session, runs cells in it, lists the token's sessions
// and closes it.
func (w *soakClient) session(tag string, n int) error {
	var open sessionAnswer
	if err := w.tool("session_open", map[string]any{"language": "python"}, &open); err != nil {
		return err
	}
	if open.Session == nil {
		return fmt.Errorf("session_open: %+v", open.Error)
	}
	id := open.Session.ID
	w.owned.session(w.token, id, true)
	defer w.owned.session(w.token, id, false)
	closeIt := func() error {
		var c sessionAnswer
		if err := w.tool("session_close", map[string]any{"session_id": id}, &c); err != nil {
			return err
		}
		if !c.Closed {
			return fmt.Errorf("session_close: %+v", c)
		}
		return nil
	}
	cells := []struct{ code, want string }{
		{fmt.Sprintf("x = %d\ntag = %q", n, tag), ""},
		{"x += 1", ""},
		{"print(tag, x)", fmt.Sprintf("%s %d\n", tag, n+1)},
	}
	for _, cell := range cells {
		r, err := w.run(map[string]any{"language": "python", "code": cell.code, "session_id": id})
		if err == nil && (r.Status != contract.StatusOK || r.Stdout != cell.want) {
			err = fmt.Errorf("cell %q: %s %q %+v", cell.code, r.Status, r.Stdout, r.Error)
		}
		if err != nil {
			_ = closeIt()
			return err
		}
	}
	var list sessionAnswer
	if err := w.tool("session_list", map[string]any{}, &list); err != nil {
		return err
	}
	for _, l := range list.Sessions {
		if w.owned.otherTokens(w.token, l.ID) {
			w.cross("token %d's session_list shows %s", w.token, l.ID)
		}
	}
	return closeIt()
}

// long makes a run that answers running with its handle, then collects it
// with run_wait.
func (w *soakClient) long(tag string) error {
	var r contract.Result
	if err := w.tool("run_code", map[string]any{"language": "python", "timeout_seconds": 60, "code": "import time\ntime.sleep(4)\nprint(" + strconv.Quote(tag) + ")"}, &r); err != nil {
		return err
	}
	w.owned.addRun(r.RunID, "")
	if r.Status != contract.StatusRunning {
		return fmt.Errorf("a 4 s run answered %s, not running with its handle", r.Status)
	}
	if err := w.collect(&r); err != nil {
		return err
	}
	if r.Status != contract.StatusOK || r.Stdout != tag+"\n" {
		return fmt.Errorf("got %s %q %+v", r.Status, r.Stdout, r.Error)
	}
	return nil
}

// soakHostile is the client that keeps trying what the defects allowed.
type soakHostile struct {
	t     *testing.T
	s     *netServer
	c     *client.Client
	token string
	owned *soakOwned
	stats *soakStats
	won   func(string, ...any)
	// bg are the tries still waiting for the server to close a
	// connection.
	bg sync.WaitGroup
}

// step is one of the hostile's tries, in turn; each must be refused. A
// try that could not be made (a network error on our side) counts as an
// error of its kind.
func (h *soakHostile) step(ctx context.Context, n int) {
	kinds := []string{"hostile: cancels", "hostile: others' resources", "hostile: others' runs and sessions",
		"hostile: dripped bodies", "hostile: oversized bodies", "hostile: idle connections"}
	kind := kinds[n%len(kinds)]
	start := time.Now()
	var err error
	switch n % len(kinds) {
	case 0:
		// Cancels for every small request id: the team's calls must not
		// notice (no call lost).
		for i := range 32 {
			for _, id := range []any{i, strconv.Itoa(i)} {
				if status, _ := h.post(map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": id, "reason": "soak"}}); status != http.StatusAccepted {
					err = fmt.Errorf("a cancel: HTTP %d", status)
				}
			}
		}
	case 1:
		uri, _ := h.owned.pick(n)
		if uri == "" {
			return // nothing to aim at yet
		}
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		res, rerr := h.c.ReadResource(rctx, req)
		cancel()
		if rerr == nil {
			raw, _ := json.Marshal(res.Contents)
			h.won("read %s: %.100s", uri, raw)
		}
	case 2:
		_, run := h.owned.pick(n)
		if run != "" {
			var r contract.Result
			if e := toolInto(ctx, h.c, "run_wait", map[string]any{"run_id": run, "wait_seconds": 0}, &r); e != nil {
				err = e
			} else if r.Error == nil || r.Error.Kind != contract.KindInvalidRequest {
				h.won("run_wait %s: %s %+v", run, r.Status, r.Error)
			}
		}
		if id := h.owned.anySession(); id != "" {
			var r contract.Result
			if e := toolInto(ctx, h.c, "run_code", map[string]any{"language": "python", "code": "print(globals().get('tag'))", "session_id": id}, &r); e != nil {
				err = e
			} else if r.Error == nil || r.Error.Kind != contract.KindSessionNotFound {
				h.won("run_code in session %s: %s %q %+v", id, r.Status, r.Stdout, r.Error)
			}
			var c sessionAnswer
			if e := toolInto(ctx, h.c, "session_close", map[string]any{"session_id": id}, &c); e != nil {
				err = e
			} else if c.Closed || c.Error == nil || c.Error.Kind != contract.KindSessionNotFound {
				h.won("session_close %s: %+v", id, c)
			}
		}
		var list sessionAnswer
		if e := toolInto(ctx, h.c, "session_list", map[string]any{}, &list); e != nil {
			err = e
		} else if len(list.Sessions) > 0 {
			h.won("session_list shows %+v", list.Sessions)
		}
	case 3:
		// Unauthenticated bodies dripped a byte a second: a 401 at once,
		// and the connection closed.
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 8 {
			wg.Go(func() {
				if e := h.drip(); e != nil {
					mu.Lock()
					err = e
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	case 4:
		// Past http.max_request_bytes: announced, and chunked.
		for _, chunked := range []bool{false, true} {
			if status, e := h.oversized(chunked); e != nil {
				err = e
			} else if status != http.StatusRequestEntityTooLarge {
				h.won("an oversized body (chunked %v): HTTP %d", chunked, status)
			}
		}
	case 5:
		// Idle connections, without a token and after an authenticated
		// request: the server closes them (a head within 10 s; idle
		// keep-alive after 60 s, which this soak waits no longer than 75 s
		// for, beside its other tries).
		for range 8 {
			c, e := net.DialTimeout("tcp", h.s.addr, 5*time.Second)
			if e != nil {
				err = e
				continue
			}
			h.bg.Go(func() {
				defer c.Close()
				if !closedWithin(c, 20*time.Second) {
					h.won("an idle connection without a token was kept 20 s")
				}
			})
		}
		c, e := net.DialTimeout("tcp", h.s.addr, 5*time.Second)
		if e != nil {
			err = e
			break
		}
		h.bg.Go(func() {
			defer c.Close()
			_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+h.s.addr+"\r\n\r\n")
			_ = c.SetReadDeadline(time.Now().Add(75 * time.Second))
			br := bufio.NewReader(c)
			if resp, e := http.ReadResponse(br, nil); e == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if _, e := br.ReadByte(); e != nil {
				if ne, ok := e.(net.Error); ok && ne.Timeout() {
					h.won("an idle keep-alive connection was kept 75 s")
				}
			}
		})
	}
	h.stats.add(kind, time.Since(start), err)
}

// post sends one message of protocol 2026-07-28 with the hostile's token.
func (h *soakHostile) post(msg map[string]any) (int, []byte) {
	return modernPost(h.t, h.s.url("http"), h.token, msg)
}

// drip sends a POST without a token that announces a body and drips it,
// and wants a 401 within 5 s, then the connection closed.
func (h *soakHostile) drip() error {
	c, err := net.DialTimeout("tcp", h.s.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+h.s.addr+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
		return err
	}
	defer drip(c)()
	status, open := statusWithin(c, 10*time.Second)
	if !strings.Contains(status, " 401 ") || open > 5*time.Second {
		h.won("a dripped unauthenticated body: status %q, open %v after it", status, open)
	}
	return nil
}

// oversized sends a body past http.max_request_bytes (1 MiB) with the
// hostile's token and returns the status.
func (h *soakHostile) oversized(chunked bool) (int, error) {
	c, err := net.DialTimeout("tcp", h.s.addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	head := "POST /mcp HTTP/1.1\r\nHost: " + h.s.addr + "\r\nAuthorization: Bearer " + h.token + "\r\nContent-Type: application/json\r\n"
	if !chunked {
		_, err = io.WriteString(c, head+"Content-Length: 2097152\r\n\r\n{")
	} else {
		_, err = io.WriteString(c, head+"Transfer-Encoding: chunked\r\n\r\n")
		go writeChunks(c, 40)
	}
	if err != nil {
		return 0, err
	}
	status, _ := statusWithin(c, 10*time.Second)
	f := strings.Fields(status)
	if len(f) < 2 {
		return 0, fmt.Errorf("no answer to an oversized body: %q", status)
	}
	code, _ := strconv.Atoi(f[1])
	return code, nil
}

// openFDs counts a process's open file descriptors (-1: it is gone).
func openFDs(pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(fds)
}

// soakRSS is a process's RSS in KiB (-1: it is gone).
func soakRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kib
		}
	}
	return -1
}

// soakSampleEvery is how often the server's RSS and descriptors are read:
// every 5 s, more often in a soak too short for a dozen samples a quarter.
func soakSampleEvery(d time.Duration) time.Duration {
	return min(5*time.Second, max(time.Second, d/60))
}

// soakWarmUp is the part of the soak whose samples do not count: the
// server fills its caches, pools and buffers.
func soakWarmUp(d time.Duration) time.Duration { return min(d/5, 2*time.Minute) }

// soakQuarters are the first and last quarters of the samples after warm-up.
func soakQuarters(samples []soakSample, d time.Duration) (first, last []soakSample) {
	warm := soakWarmUp(d)
	q := (d - warm) / 4
	for _, s := range samples {
		switch {
		case s.at >= warm && s.at < warm+q:
			first = append(first, s)
		case s.at >= d-q:
			last = append(last, s)
		}
	}
	return first, last
}

func soakMedian(v []int) int {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func soakField(samples []soakSample, f func(soakSample) int) []int {
	var v []int
	for _, s := range samples {
		v = append(v, f(s))
	}
	return v
}

// soakFlat fails unless the last quarter's medians of RSS and descriptors are
// within the slack of the first quarter's.
func soakFlat(t *testing.T, samples []soakSample, d time.Duration) {
	t.Helper()
	first, last := soakQuarters(samples, d)
	if len(first) < 3 || len(last) < 3 {
		t.Fatalf("too few samples to judge (%d and %d): soak longer", len(first), len(last))
	}
	rss0, rss1 := soakMedian(soakField(first, func(s soakSample) int { return s.rssKiB })), soakMedian(soakField(last, func(s soakSample) int { return s.rssKiB }))
	fd0, fd1 := soakMedian(soakField(first, func(s soakSample) int { return s.fds })), soakMedian(soakField(last, func(s soakSample) int { return s.fds }))
	if allowed := rss0 + max(soakRSSSlackKiB, int(float64(rss0)*soakRSSSlackRatio)); rss1 > allowed {
		t.Errorf("the server's RSS grew: median %d KiB in the first quarter after warm-up, %d KiB in the last (at most %d)", rss0, rss1, allowed)
	}
	if allowed := fd0 + max(soakFDSlack, int(float64(fd0)*soakFDSlackRatio)); fd1 > allowed {
		t.Errorf("the server's open descriptors grew: median %d in the first quarter after warm-up, %d in the last (at most %d)", fd0, fd1, allowed)
	}
}

// soakPercentile is the p-th percentile of v.
func soakPercentile(v []time.Duration, p int) time.Duration {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[min(len(v)-1, len(v)*p/100)]
}

func soakTable(d time.Duration, st *soakStats, samples []soakSample, end soakSample, crossToken, hostileWon int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s, %d clients on %d tokens and a hostile client\n\n", d, soakClients, soakTokens)
	fmt.Fprintf(&b, "| kind | calls | errors | p50 | p95 |\n| --- | ---: | ---: | ---: | ---: |\n")
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range st.calls {
			if !yield(k) {
				return
			}
		}
	})
	total, errs := 0, 0
	for _, k := range kinds {
		total += st.calls[k]
		errs += st.errs[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s |\n", k, st.calls[k], st.errs[k],
			soakPercentile(st.took[k], 50).Round(time.Millisecond), soakPercentile(st.took[k], 95).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "| all | %d | %d | | |\n\n", total, errs)
	fmt.Fprintf(&b, "cross-token effects: %d; hostile successes: %d\n\n", crossToken, hostileWon)
	first, last := soakQuarters(samples, d)
	fmt.Fprintf(&b, "| server | start | first quarter (median) | last quarter (median) | end (idle) | max |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	if len(samples) > 0 {
		rss := soakField(samples, func(s soakSample) int { return s.rssKiB })
		fds := soakField(samples, func(s soakSample) int { return s.fds })
		fmt.Fprintf(&b, "| RSS (MiB) | %.1f | %.1f | %.1f | %.1f | %.1f |\n", float64(rss[0])/1024,
			float64(soakMedian(soakField(first, func(s soakSample) int { return s.rssKiB })))/1024,
			float64(soakMedian(soakField(last, func(s soakSample) int { return s.rssKiB })))/1024, float64(end.rssKiB)/1024, float64(slices.Max(rss))/1024)
		fmt.Fprintf(&b, "| open fds | %d | %d | %d | %d | %d |\n", fds[0], soakMedian(soakField(first, func(s soakSample) int { return s.fds })),
			soakMedian(soakField(last, func(s soakSample) int { return s.fds })), end.fds, slices.Max(fds))
		running := soakField(samples, func(s soakSample) int { return s.running })
		fmt.Fprintf(&b, "| boxes | %d | %d | %d | %d | %d |\n", running[0], soakMedian(soakField(first, func(s soakSample) int { return s.running })),
			soakMedian(soakField(last, func(s soakSample) int { return s.running })), end.running, slices.Max(running))
	}
	fmt.Fprintf(&b, "(%d samples every %s; warm-up %s)", len(samples), soakSampleEvery(d), soakWarmUp(d))
	return b.String()
}
