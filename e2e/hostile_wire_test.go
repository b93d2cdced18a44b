//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
)

// The box's code as an attacker of the two surfaces it reaches over the
// wire: tool calls (the socket to runbox-init, and on to the host) and the
// network proxy. Each case asserts what must not happen, that what the box
// sent is bounded, typed and recorded (the result's network, the audit
// log, /metrics), and that the next call answers normally.

// wire is one server for the attacks: the fake upstream three times (two
// under a deny policy, by each spelling of a tool's name), tight tool-call
// bounds, the test's own HTTP server as the one declared endpoint (unless
// !network: a declared network adds its bytes to what the channel carries,
// which hid defect 8), an audit log and /metrics on its own address.
type wire struct {
	c              *client.Client
	audit, metrics string
	fakeLog        string
	port           int
	network        bool
	stderr         *syncBuffer
	mu             sync.Mutex
	hits           []string
}

func startWire(t *testing.T, network bool) *wire {
	t.Helper()
	w := &wire{}
	dir := t.TempDir()
	w.audit, w.fakeLog = filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "fake.log")
	t.Setenv("RUNBOX_TEST_FAKE_LOG", w.fakeLog)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.hits = append(w.hits, r.URL.Path)
		w.mu.Unlock()
		fmt.Fprintf(rw, "ok %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	w.port, _ = strconv.Atoi(u.Port())
	bin := upstreamFake(t)
	maddr := freeAddr(t)
	w.metrics = "http://" + maddr + "/metrics"
	fake := func(name, policy string) string {
		return "  - name: " + name + "\n    command: " + bin + "\n    env:\n      FAKE_UPSTREAM_LOG: RUNBOX_TEST_FAKE_LOG\n" + policy
	}
	m := fmt.Sprintf(`audit:
  enabled: true
  path: %s
metrics:
  listen: %s
servers:
%s%s%s
tool_calls:
  max_calls: 100
  max_bytes: 1MiB
  call_timeout_seconds: 10
`, w.audit, maddr, fake("fake", ""), fake("byid", "    deny: [\"get_env\"]\n"), fake("byname", "    deny: [\"get-env\"]\n"))
	w.network = network
	if network {
		m += fmt.Sprintf("network:\n  allow:\n    - host: 127.0.0.1\n      ports: [%d]\n  max_connections: 20\n", w.port)
	}
	// Registered first, so it runs after the server's own cleanup has
	// stopped it: no box of its may be left.
	var pid string
	t.Cleanup(func() {
		if pid == "" {
			return
		}
		deadline := time.Now().Add(15 * time.Second)
		for left := engineBoxes(t, "", pid); len(left) > 0; left = engineBoxes(t, "", pid) {
			if time.Now().After(deadline) {
				t.Errorf("boxes left behind: %v", left)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	s := startNetServer(t, "http", "--manifest", writeManifest(t, m))
	pid = strconv.Itoa(s.cmd.Process.Pid)
	w.stderr = s.stderr
	w.c = s.client(t, "http")
	return w
}

// run runs code and returns its result.
func (w *wire) run(t *testing.T, lang, code string, timeout float64) contract.Result {
	t.Helper()
	return callOn(t, w.c, map[string]any{"language": lang, "code": code, "timeout_seconds": timeout})
}

// next is the check after every attack: a plain run, a tool call and a
// connection all answer normally.
func (w *wire) next(t *testing.T) {
	t.Helper()
	code, want := "import runbox_tools as tools\nprint(tools.fake.echo(text=\"next\"))\n", "next\n"
	if w.network {
		code += fmt.Sprintf("import urllib.request\nprint(urllib.request.urlopen(\"http://127.0.0.1:%d/next\", timeout=20).read().decode())\n", w.port)
		want += "ok /next\n"
	}
	r := w.run(t, "python", code, 60)
	if r.Status != contract.StatusOK || r.Stdout != want {
		t.Fatalf("the next call: status %s stdout %q stderr %q error %+v\nserver:\n%s", r.Status, r.Stdout, r.Stderr, r.Error, w.stderr)
	}
}

// entry is run id's audit line.
func (w *wire) entry(t *testing.T, id string) audit.Entry {
	t.Helper()
	var e audit.Entry
	waitFor(t, 10*time.Second, func() bool {
		entries, err := audit.Read(w.audit, 0)
		if err != nil {
			return false
		}
		var ok bool
		e, ok = audit.Find(entries, id)
		return ok
	})
	return e
}

// metric is the value of the /metrics line that starts with prefix, or -1.
func (w *wire) metric(t *testing.T, prefix string) float64 {
	t.Helper()
	for _, line := range strings.Split(get(t, w.metrics, "", http.StatusOK), "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, prefix+" "), 64)
			return v
		}
	}
	return -1
}

func (w *wire) hit(path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.hits {
		if h == path {
			return true
		}
	}
	return false
}

// notSandbox fails a run that ended as the box's failure (killed for a
// protocol break) rather than as the code's.
func notSandbox(t *testing.T, r contract.Result) {
	t.Helper()
	if r.Error != nil && (r.Error.Kind == contract.KindSandbox || r.Error.Kind == contract.KindSessionLost) {
		t.Fatalf("the run ended as %s: %s\nstdout %q stderr %q", r.Error.Kind, r.Error.Message, r.Stdout, r.Stderr)
	}
}

const toolPrelude = `import json, socket, time
import runbox_tools as tools
def kind(f):
    try:
        f()
        return "ok"
    except tools.ToolError as e:
        return e.kind
def raw(data, shut=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/tmp/.runbox/tools.sock")
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    b = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        b += c
    s.close()
    try:
        return json.loads(b)["error"]["kind"]
    except Exception:
        return "unreadable %r" % b[:200]
`

// TestHostileWireDefects: the defects a hostile review found on these
// surfaces (the tool-call and proxy streams), each as found.
func TestHostileWireDefects(t *testing.T) {
	w, wn := startWire(t, false), startWire(t, true)

	t.Run("8: one call past tool_calls.max_bytes is that call's limit error, not a killed box", func(t *testing.T) {
		before := w.metric(t, `runbox_tool_calls_total{outcome="limit",server="fake"}`)
		r := w.run(t, "python", toolPrelude+`print(kind(lambda: tools.fake.echo(text="x" * (5 << 20))))
print(tools.fake.echo(text="same run"))
`, 60)
		notSandbox(t, r)
		if r.Status != contract.StatusOK || r.Stdout != "limit\nsame run\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		e := w.entry(t, r.RunID)
		if len(e.ToolCalls) != 2 || e.ToolCalls[0].Outcome != "limit" || e.ToolCalls[0].Server != "fake" || e.ToolCalls[0].Tool != "echo" || e.ToolCalls[0].BytesIn < 5<<20 {
			t.Fatalf("audit tool calls: %+v", e.ToolCalls)
		}
		if after := w.metric(t, `runbox_tool_calls_total{outcome="limit",server="fake"}`); after != max(before, 0)+1 {
			t.Fatalf("limit calls in /metrics: %v, then %v", before, after)
		}
		w.next(t)
	})

	t.Run("8: JavaScript, the same", func(t *testing.T) {
		r := w.run(t, "javascript", `const tools = require('runbox_tools');
(async () => {
  try { await tools.fake.echo({text: 'x'.repeat(5 << 20)}); console.log('ok'); } catch (e) { console.log(e.kind); }
  console.log(await tools.fake.echo({text: 'same run'}));
})();`, 60)
		notSandbox(t, r)
		if r.Status != contract.StatusOK || r.Stdout != "limit\nsame run\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		w.next(t)
	})

	t.Run("8: calls that together pass the run's bytes are limit errors, the run goes on", func(t *testing.T) {
		// 20 calls of 300 KiB: the run's streams may carry 3 MiB.
		r := w.run(t, "python", toolPrelude+`kinds = [kind(lambda: tools.fake.echo(text="x" * (300 << 10))) for _ in range(20)]
print(kinds.count("ok"), kinds.count("limit"), len(kinds))
`, 120)
		notSandbox(t, r)
		if r.Status != contract.StatusOK || r.Stdout != "1 19 20\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		if e := w.entry(t, r.RunID); len(e.ToolCalls) != 20 {
			t.Fatalf("audit: %d tool calls, want 20", len(e.ToolCalls))
		}
		w.next(t)
	})

	t.Run("9: a 70 MiB argument is ToolError(kind=limit), not BrokenPipeError", func(t *testing.T) {
		r := w.run(t, "python", toolPrelude+`try:
    tools.fake.echo(text="x" * (70 << 20))
    print("sent")
except tools.ToolError as e:
    print(type(e).__name__, e.kind)
print(tools.fake.echo(text="same run"))
`, 120)
		notSandbox(t, r)
		if r.Status != contract.StatusOK || r.Stdout != "ToolError limit\nsame run\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		w.next(t)
	})

	t.Run("8: under gVisor, the same", func(t *testing.T) {
		s := gvisorServer(t, faultServers(t, filepath.Join(t.TempDir(), "fake.log"))+"  max_bytes: 1MiB\n")
		r, _ := s.call(t, map[string]any{"language": "python", "timeout_seconds": 60, "code": toolPrelude + `print(kind(lambda: tools.fake.echo(text="x" * (5 << 20))))
print(tools.fake.echo(text="same run"))
`})
		notSandbox(t, r)
		if r.Status != contract.StatusOK || r.Stdout != "limit\nsame run\n" || r.Isolation != "gvisor" {
			t.Fatalf("stdout %q stderr %q error %+v isolation %s", r.Stdout, r.Stderr, r.Error, r.Isolation)
		}
	})

	t.Run("8: in a session, a cell's call past the bound is that call's limit error; the session goes on", func(t *testing.T) {
		s := dockerServer(t, faultServers(t, filepath.Join(t.TempDir(), "fake.log"))+"  max_bytes: 1MiB\n")
		id := s.open(t, "python")
		r := s.in(t, id, "python", toolPrelude+`kept = 1
print(kind(lambda: tools.fake.echo(text="x" * (5 << 20))))
print(tools.fake.echo(text="same cell"))
`, "timeout_seconds", 60)
		notSandbox(t, r)
		if r.Status != contract.StatusOK || r.Stdout != "limit\nsame cell\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		r = s.in(t, id, "python", `print(kept, tools.fake.echo(text="next cell"))`, "timeout_seconds", 60)
		if r.Status != contract.StatusOK || r.Stdout != "1 next cell\n" {
			t.Fatalf("the next cell: stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
	})

	t.Run("10: connections past network.max_connections are recorded", func(t *testing.T) {
		before := wn.metric(t, `runbox_network_connections_total{outcome="denied"}`)
		r := wn.run(t, "python", fmt.Sprintf(`import urllib.request, urllib.error
codes = []
for i in range(30):
    try:
        codes.append(urllib.request.urlopen("http://127.0.0.1:%d/c%%d" %% i, timeout=20).status)
    except urllib.error.HTTPError as e:
        codes.append(e.code)
print(codes.count(200), codes.count(429))
`, wn.port), 120)
		if r.Status != contract.StatusOK || r.Stdout != "20 10\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		refused := 0
		for _, c := range r.Network {
			if !c.Allowed && strings.Contains(c.Reason, "network.max_connections (20)") && c.Host == "127.0.0.1" {
				refused++
			}
		}
		if len(r.Network) != 30 || refused != 10 {
			t.Fatalf("network: %d records, %d refused past the cap: %+v", len(r.Network), refused, r.Network)
		}
		if e := wn.entry(t, r.RunID); len(e.Network) != 30 {
			t.Fatalf("audit: %d connections, want 30", len(e.Network))
		}
		if after := wn.metric(t, `runbox_network_connections_total{outcome="denied"}`); after != max(before, 0)+10 {
			t.Fatalf("denied connections in /metrics: %v, then %v", before, after)
		}
		wn.next(t)
	})

	t.Run("11: a request head of 70,000 bytes is answered 431 and recorded", func(t *testing.T) {
		r := wn.run(t, "python", proxyPrelude(wn.port)+`print(raw(b"GET http://127.0.0.1:%d/big-head HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 70000 + b"\r\n\r\n"))
after()
`, 60)
		if r.Status != contract.StatusOK || !strings.HasPrefix(r.Stdout, "431\n") || !strings.HasSuffix(r.Stdout, "ok /next\n") {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		if len(r.Network) != 2 || r.Network[0].Allowed || !strings.Contains(r.Network[0].Reason, "64 KiB") {
			t.Fatalf("network: %+v", r.Network)
		}
		if wn.hit("/big-head") {
			t.Fatal("the oversized request reached the server")
		}
		if e := wn.entry(t, r.RunID); len(e.Network) != 2 || !strings.Contains(e.Network[0].Reason, "64 KiB") {
			t.Fatalf("audit: %+v", e.Network)
		}
		wn.next(t)
	})

	t.Run("12: deny globs match both spellings of a tool's name", func(t *testing.T) {
		before := countLines(w.fakeLog, "get-env called")
		r := w.run(t, "python", toolPrelude+`print(kind(lambda: tools.byid.get_env()), kind(lambda: tools.call("byid", "get-env")))
print(kind(lambda: tools.byname.get_env()), kind(lambda: tools.call("byname", "get-env")))
print(tools.fake.get_env())
`, 60)
		if r.Status != contract.StatusOK || r.Stdout != "denied denied\ndenied denied\nenv\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		if n := countLines(w.fakeLog, "get-env called") - before; n != 1 {
			t.Fatalf("get-env reached the servers %d times, want once (the undenied one)", n)
		}
		w.next(t)
	})

	t.Run("a run with endpoints declared that connects nowhere has no network field", func(t *testing.T) {
		r := wn.run(t, "python", "print(1)", 30)
		if r.Status != contract.StatusOK || r.Network != nil {
			t.Fatalf("status %s network %#v", r.Status, r.Network)
		}
	})
}

// proxyPrelude has raw(data): one connection to the box's proxy that sends
// data and answers the status of what comes back ("closed" for nothing),
// and after(): a normal request to the declared server, printed.
func proxyPrelude(port int) string {
	return strings.ReplaceAll(`import socket, time, urllib.request
P = PORT
def raw(data, timeout=30):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=timeout)
    try:
        s.sendall(data.replace(b"%d", str(P).encode()))
    except OSError:
        pass
    try:
        line = s.makefile("rb").readline().decode(errors="replace")
    except OSError as e:
        line = type(e).__name__
    s.close()
    parts = line.split(" ")
    return parts[1] if line.startswith("HTTP/") and len(parts) > 1 else (line.strip() or "closed")
def after():
    print(urllib.request.urlopen("http://127.0.0.1:%d/next" % P, timeout=20).read().decode())
`, "PORT", strconv.Itoa(port))
}

// TestHostileWireProxy: the box's program against the proxy.
func TestHostileWireProxy(t *testing.T) {
	w := startWire(t, true)
	type want struct {
		host    string // a record for this host...
		allowed bool   // ...allowed or not...
		reason  string // ...whose reason says this
	}
	cases := []struct {
		name, attack, status string
		record               want
		// never is a path the declared server must never see.
		never string
	}{
		{"absolute URI to an undeclared host", `raw(b"GET http://undeclared.example/ HTTP/1.1\r\nHost: undeclared.example\r\n\r\n")`, "403",
			want{"undeclared.example", false, "not declared"}, ""},
		{"CONNECT to a private address", `raw(b"CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n")`, "403",
			want{"10.0.0.1", false, "not declared"}, ""},
		{"CONNECT to the metadata address", `raw(b"CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"169.254.169.254", false, "not declared"}, ""},
		{"CONNECT to localhost by name", `raw(b"CONNECT localhost:%d HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"localhost", false, "not declared"}, ""},
		{"CONNECT to a name that resolves to loopback", `raw(b"CONNECT 127.0.0.1.nip.io:%d HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"127.0.0.1.nip.io", false, "not declared"}, ""},
		{"CONNECT to the loopback as a decimal number", `raw(b"CONNECT 2130706433:%d HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"2130706433", false, "not declared"}, ""},
		{"CONNECT to an IPv6 loopback literal", `raw(b"CONNECT [::1]:%d HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"::1", false, "not declared"}, ""},
		{"CONNECT to the metadata address as an IPv4-mapped IPv6 literal", `raw(b"CONNECT [::ffff:a9fe:a9fe]:80 HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"::ffff:a9fe:a9fe", false, "not declared"}, ""},
		{"CONNECT to an undeclared port of a declared host", `raw(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"127.0.0.1", false, "127.0.0.1:1 is not declared"}, ""},
		{"CONNECT to the proxy itself", `raw(b"CONNECT 127.0.0.1:3128 HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"127.0.0.1", false, "127.0.0.1:3128 is not declared"}, ""},
		{"userinfo that names the declared host before an undeclared one", `raw(b"GET http://127.0.0.1:%d@undeclared.example/ui HTTP/1.1\r\nHost: x\r\n\r\n")`, "403",
			want{"undeclared.example", false, "not declared"}, "/ui"},
		{"a Host header naming a declared host, the URI an undeclared one", `raw(b"GET http://undeclared.example/hh HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n")`, "403",
			want{"undeclared.example", false, "not declared"}, "/hh"},
		{"a Host header naming an undeclared host, the URI the declared one", `raw(b"GET http://127.0.0.1:%d/host-mismatch HTTP/1.1\r\nHost: undeclared.example\r\n\r\n")`, "200",
			want{"127.0.0.1", true, ""}, ""},
		{"request smuggling: Content-Length and Transfer-Encoding", `raw(b"POST http://127.0.0.1:%d/front HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://undeclared.example/smuggled HTTP/1.1\r\nHost: undeclared.example\r\n\r\n")`, "200",
			want{"127.0.0.1", true, ""}, "/smuggled"},
		{"a second request pipelined on one connection", `raw(b"GET http://127.0.0.1:%d/one HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET http://127.0.0.1:%d/two HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")`, "200",
			want{"127.0.0.1", true, ""}, "/two"},
		{"a relative URI", `raw(b"GET /relative HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")`, "400",
			want{"", false, "absolute http:// URI"}, "/relative"},
		{"not HTTP at all", `raw(b"\x00\xff\x16\x03\x01 hello\r\n\r\n")`, "400",
			want{"", false, "no HTTP proxy request"}, ""},
		{"a head past 64 KiB", `raw(b"GET http://127.0.0.1:%d/pad HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 200000 + b"\r\n\r\n")`, "431",
			want{"", false, "64 KiB"}, "/pad"},
		{"many headers, each small, past 64 KiB together", `raw(b"GET http://127.0.0.1:%d/many HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(10000)) + b"\r\n")`, "431",
			want{"", false, "64 KiB"}, "/many"},
		{"a slowloris head", `s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(b"GET http://127.0.0.1:%d/slow HTTP/1.1\r\n" % P)
s.settimeout(1)
start, closed = time.time(), False
while time.time() - start < 25:
    try:
        s.sendall(b"X: y\r\n")
        if s.recv(100) == b"":
            closed = True
            break
    except socket.timeout:
        pass
    except OSError:
        closed = True
        break
print("given up" if closed and time.time() - start < 20 else "held %.0f s" % (time.time() - start))`, "given up",
			want{"", false, "did not arrive within"}, "/slow"},
	}
	refused := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			attack := c.attack
			if strings.HasPrefix(attack, "raw(") {
				attack = "print(" + attack + ")"
			}
			r := w.run(t, "python", proxyPrelude(w.port)+attack+"\nafter()\n", 60)
			if r.Status != contract.StatusOK || !strings.HasPrefix(r.Stdout, c.status+"\n") || !strings.HasSuffix(r.Stdout, "ok /next\n") {
				t.Fatalf("stdout %q (want %s then the next request's answer) stderr %q error %+v", r.Stdout, c.status, r.Stderr, r.Error)
			}
			if c.never != "" && w.hit(c.never) {
				t.Fatalf("%s reached the declared server", c.never)
			}
			found := false
			for _, rec := range r.Network {
				if !rec.Allowed {
					refused++
				}
				if rec.Host == c.record.host && rec.Allowed == c.record.allowed && strings.Contains(rec.Reason, c.record.reason) {
					found = true
				}
				if rec.Allowed && rec.Address != "" && !strings.HasPrefix(rec.Address, "127.0.0.1:"+strconv.Itoa(w.port)) {
					t.Fatalf("a connection reached %s", rec.Address)
				}
			}
			last := r.Network[len(r.Network)-1]
			if !found || !last.Allowed || last.Host != "127.0.0.1" {
				t.Fatalf("network: %+v", r.Network)
			}
			if e := w.entry(t, r.RunID); len(e.Network) != len(r.Network) {
				t.Fatalf("audit: %d connections, the result %d", len(e.Network), len(r.Network))
			}
		})
	}
	t.Run("a flood of connections past twice max_connections: the records stay bounded and count the rest", func(t *testing.T) {
		r := w.run(t, "python", proxyPrelude(w.port)+`codes = [raw(b"GET http://127.0.0.1:%d/flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") for _ in range(50)]
print(codes.count("200"), codes.count("429"))
`, 120)
		if r.Status != contract.StatusOK || r.Stdout != "20 30\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		for _, rec := range r.Network {
			if !rec.Allowed {
				refused++
			}
		}
		last := r.Network[len(r.Network)-1]
		if len(r.Network) != 41 || last.Allowed || !strings.Contains(last.Reason, "network.max_connections (20) connections already: 10 more refused") {
			t.Fatalf("%d records, the last %+v", len(r.Network), last)
		}
		if e := w.entry(t, r.RunID); len(e.Network) != 41 {
			t.Fatalf("audit: %d connections", len(e.Network))
		}
		w.next(t)
	})
	if got := max(w.metric(t, `runbox_network_connections_total{outcome="denied"}`), 0); got != float64(refused) {
		t.Fatalf("/metrics counts %v refused connections, the results %d", got, refused)
	}
	w.next(t)
}

// TestHostileWireToolCalls: the box's program against the tools socket and
// the calls it carries.
func TestHostileWireToolCalls(t *testing.T) {
	w := startWire(t, false)
	nested := `b'{"op":"call","server":"fake","tool":"echo","args":{"text":' + b"[" * 100000 + b"]" * 100000 + b"}}"`
	cases := []struct {
		name, code, want string
		// sameRun: the run can still call a tool after the attack (not
		// when the attack spent the run's bounds on purpose).
		sameRun bool
		timeout float64
		check   func(t *testing.T, r contract.Result)
	}{
		{"malformed JSON to the socket", `print(raw(b"{not json"))`, "bad_request\n", true, 60, nil},
		{"JSON of the wrong types", `print(raw(b'{"op":"call","server":1,"tool":[],"args":"x"}'))`, "bad_request\n", true, 60, nil},
		{"an empty request", `print(raw(b""))`, "bad_request\n", true, 60, nil},
		{"arguments nested 100,000 deep", `print(raw(` + nested + `))`, "bad_request\n", true, 60, nil},
		{"a request that is not one JSON value", `print(raw(b'{"op":"list"} {"op":"call","server":"fake","tool":"secret"}'))`, "bad_request\n", true, 60, nil},
		{"an undeclared server", `print(kind(lambda: tools.call("nope", "echo", {})), kind(lambda: tools.nope.echo()))`, "unknown_server unknown_server\n", true, 60, nil},
		{"an undeclared tool", `print(kind(lambda: tools.call("fake", "nope", {})))`, "unknown_tool\n", true, 60, nil},
		{"unicode and control characters in names", `print(kind(lambda: tools.call("fake", "e\u0301cho\u202e\x00", {})), kind(lambda: tools.call("fa\u212ae", "echo", {"text": "x"})))`,
			"unknown_tool unknown_server\n", true, 60, nil},
		{"a 100 KB tool name, recorded cut", `print(kind(lambda: tools.call("fake", "n" * 100000, {})))`, "unknown_tool\n", true, 60,
			func(t *testing.T, r contract.Result) {
				e := w.entry(t, r.RunID)
				if len(e.ToolCalls) == 0 || len(e.ToolCalls[0].Tool) > 300 {
					t.Fatalf("audit tool name of %d bytes", len(e.ToolCalls[0].Tool))
				}
			}},
		{"a connection that never half-closes", `s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("/tmp/.runbox/tools.sock")
s.sendall(b'{"op":"call","server":"fake"')
s.settimeout(2)
try:
    print("answered %r" % s.recv(100))
except socket.timeout:
    print("waiting")`, "waiting\n", true, 60, nil},
		{"a flood of calls", `ks = [kind(lambda: tools.fake.echo(text=str(i))) for i in range(150)]
print(ks.count("ok"), ks.count("limit"))`, "100 50\n", false, 120, nil},
		{"an answer larger than the run's bytes", `print(kind(lambda: tools.fake.big(mb=2)))`, "limit\n", false, 60, nil},
		{"arguments that are not JSON", `print(kind(lambda: tools.call("fake", "echo", {"text": float("nan")})))`, "bad_request\n", true, 60, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code := toolPrelude + c.code + "\n"
			want := c.want
			if c.sameRun {
				code += `print(tools.fake.echo(text="same run"))` + "\n"
				want += "same run\n"
			}
			r := w.run(t, "python", code, c.timeout)
			notSandbox(t, r)
			if r.Status != contract.StatusOK || r.Stdout != want {
				t.Fatalf("stdout %q, want %q; stderr %q error %+v", r.Stdout, want, r.Stderr, r.Error)
			}
			if c.check != nil {
				c.check(t, r)
			}
			w.next(t)
		})
	}

	t.Run("a call that outlives its run is cancelled upstream", func(t *testing.T) {
		before := countLines(w.fakeLog, "hang cancelled")
		r := w.run(t, "python", toolPrelude+"tools.fake.hang()\n", 3)
		if r.Error == nil || r.Error.Kind != contract.KindTimeout {
			t.Fatalf("result %+v", r.Error)
		}
		waitFor(t, 15*time.Second, func() bool { return countLines(w.fakeLog, "hang cancelled") > before })
		w.next(t)
	})

	t.Run("the client cancels mid-call: the call is cancelled upstream", func(t *testing.T) {
		before := countLines(w.fakeLog, "hang cancelled")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := w.c.CallTool(ctx, newCall(map[string]any{"language": "python", "code": toolPrelude + "tools.fake.hang()\n", "timeout_seconds": 60})); err == nil {
			t.Fatal("the cancelled call answered")
		}
		waitFor(t, 15*time.Second, func() bool { return countLines(w.fakeLog, "hang cancelled") > before })
		w.next(t)
	})

	t.Run("a process left behind calls no tool after its run", func(t *testing.T) {
		before := countLines(w.fakeLog, "secret called")
		r := w.run(t, "python", `import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time, runbox_tools as t\ntime.sleep(3)\nt.fake.secret()"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("left")
`, 30)
		if r.Status != contract.StatusOK || r.Stdout != "left\n" {
			t.Fatalf("stdout %q error %+v", r.Stdout, r.Error)
		}
		time.Sleep(6 * time.Second)
		if n := countLines(w.fakeLog, "secret called") - before; n != 0 {
			t.Fatalf("a call from after the run reached the server %d times", n)
		}
		w.next(t)
	})

	t.Run("JavaScript: arguments JSON cannot carry are a typed error, not a crash", func(t *testing.T) {
		r := w.run(t, "javascript", `const tools = require('runbox_tools');
(async () => {
  const loop = {}; loop.self = loop;
  for (const args of [{n: 1n}, loop]) {
    try { await tools.fake.echo(args); console.log('ok'); } catch (e) { console.log(e.kind); }
  }
  console.log(await tools.fake.echo({text: 'same run'}));
})();`, 60)
		if r.Status != contract.StatusOK || r.Stdout != "bad_request\nbad_request\nsame run\n" {
			t.Fatalf("stdout %q stderr %q error %+v", r.Stdout, r.Stderr, r.Error)
		}
		w.next(t)
	})
}
