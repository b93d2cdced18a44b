//go:build e2e

package e2e

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
)

// netServers are the test's own servers on 127.0.0.1: plain HTTP and
// HTTPS (a test certificate the box trusts through an input file).
type netServers struct {
	plain, tls    *httptest.Server
	pport, tport  int
	ca            string
	inflight, max atomic.Int64
}

func startNetServers(t *testing.T) *netServers {
	t.Helper()
	ns := &netServers{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ns.inflight.Add(1)
		defer ns.inflight.Add(-1)
		for m := ns.max.Load(); n > m && !ns.max.CompareAndSwap(m, n); m = ns.max.Load() {
		}
		switch r.URL.Path {
		case "/big":
			size, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(size))
			chunk := strings.Repeat("x", 64<<10)
			for size > 0 {
				k := min(size, len(chunk))
				if _, err := io.WriteString(w, chunk[:k]); err != nil {
					return
				}
				size -= k
			}
		case "/slow":
			time.Sleep(300 * time.Millisecond)
			io.WriteString(w, "slow")
		default:
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
		}
	})
	ns.plain = httptest.NewServer(h)
	ns.tls = httptest.NewTLSServer(h)
	t.Cleanup(ns.plain.Close)
	t.Cleanup(ns.tls.Close)
	port := func(s *httptest.Server) int {
		u, _ := url.Parse(s.URL)
		p, _ := strconv.Atoi(u.Port())
		return p
	}
	ns.pport, ns.tport = port(ns.plain), port(ns.tls)
	ns.ca = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ns.tls.Certificate().Raw}))
	return ns
}

// manifest declares the test servers by address, and two names that
// resolve to a loopback and the metadata address without naming them.
func (ns *netServers) manifest(extra string) string {
	return fmt.Sprintf(`network:
  allow:
    - host: 127.0.0.1
      ports: [%d, %d]
    - host: loop.test
      ports: [%d]
    - host: meta.test
      ports: [80]
  hosts:
    loop.test: 127.0.0.1
    meta.test: 169.254.169.254
%s`, ns.pport, ns.tport, ns.pport, extra)
}

func (ns *netServers) files() []any {
	return []any{map[string]any{"path": "ca.pem", "content": ns.ca}}
}

func netCall(t *testing.T, s *server, lang, code string, files []any, timeout float64) contract.Result {
	t.Helper()
	args := map[string]any{"language": lang, "code": code, "timeout_seconds": timeout}
	if files != nil {
		args["files"] = files
	}
	r, _ := s.call(t, args)
	return r
}

const pyClient = `
import os, urllib.request
os.environ["SSL_CERT_FILE"] = "ca.pem"
for base in ("http://127.0.0.1:%d", "https://127.0.0.1:%d"):
    print(urllib.request.urlopen(base + "/get", timeout=10).read().decode())
    print(urllib.request.urlopen(urllib.request.Request(base + "/post", data=b"hello"), timeout=10).read().decode())
`

const nodeClient = `
for (const base of ['http://127.0.0.1:%d', 'https://127.0.0.1:%d']) {
  console.log(await (await fetch(base + '/get')).text());
  console.log(await (await fetch(base + '/post', {method: 'POST', body: 'hello'})).text());
}
`

// The clients just work: Python's urllib (proxy variables) and Node's
// fetch (runbox's preload), GET and POST, plain HTTP and HTTPS, each
// connection in the result with the rule that allowed it.
func TestNetworkClients(t *testing.T) {
	ns := startNetServers(t)
	s := engineServer(t, "", ns.manifest(""))
	testNetworkClients(t, s, ns)
}

func testNetworkClients(t *testing.T, s *server, ns *netServers) {
	want := "GET /get \nPOST /post hello\nGET /get \nPOST /post hello\n"
	r := netCall(t, s, "python", fmt.Sprintf(pyClient, ns.pport, ns.tport), ns.files(), 30)
	mustOK(t, r)
	if r.Stdout != want {
		t.Fatalf("python printed %q", r.Stdout)
	}
	checkAllowed(t, r, 4)
	// Node reads NODE_EXTRA_CA_CERTS at start: bash starts it with one.
	r = netCall(t, s, "bash", "cat > client.mjs <<'EOF'\n"+fmt.Sprintf(nodeClient, ns.pport, ns.tport)+"\nEOF\nNODE_EXTRA_CA_CERTS=ca.pem node client.mjs", ns.files(), 30)
	mustOK(t, r)
	if r.Stdout != want {
		t.Fatalf("node printed %q\nstderr: %s", r.Stdout, r.Stderr)
	}
	checkAllowed(t, r, 4)
}

func checkAllowed(t *testing.T, r contract.Result, n int) {
	t.Helper()
	if len(r.Network) != n {
		t.Fatalf("network: %+v", r.Network)
	}
	for _, c := range r.Network {
		if !c.Allowed || c.Host != "127.0.0.1" || !strings.HasPrefix(c.Rule, "network.allow[0] (127.0.0.1:") || c.BytesIn == 0 || c.BytesOut == 0 ||
			!strings.HasPrefix(c.Address, "127.0.0.1:") || c.Reason != "" {
			t.Errorf("connection: %+v", c)
		}
	}
}

// Refusals are immediate, readable by the program, in the result, and a
// run that fails after one is forbidden_network naming the host.
func TestNetworkRefusals(t *testing.T) {
	ns := startNetServers(t)
	testNetworkRefusals(t, engineServer(t, "", ns.manifest("")), ns)
}

func testNetworkRefusals(t *testing.T, s *server, ns *netServers) {

	// Plain HTTP: a 403 whose body names the entry to add.
	r := netCall(t, s, "python", `
import urllib.request, urllib.error
try:
    urllib.request.urlopen("http://undeclared.example/x", timeout=10)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`, nil, 30)
	mustOK(t, r)
	if !strings.Contains(r.Stdout, "403 runbox: undeclared.example:80 is not declared in the manifest's network.allow; to allow it add network.allow: [{host: undeclared.example, ports: [80]}]") {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if len(r.Network) != 1 || r.Network[0].Allowed || r.Network[0].Host != "undeclared.example" {
		t.Fatalf("network %+v", r.Network)
	}

	// HTTPS (CONNECT) uncaught: forbidden_network with the host.
	start := time.Now()
	r = netCall(t, s, "python", `
import urllib.request
urllib.request.urlopen("https://undeclared.example/", timeout=10)
`, nil, 30)
	info := wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, "undeclared.example:443") || info.Line != 3 {
		t.Fatalf("error %+v", info)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a refusal took %v", d)
	}

	// Declared names that resolve to loopback or metadata addresses the
	// manifest does not name: refused, never dialled.
	for _, tc := range []struct{ url, why string }{
		{fmt.Sprintf("http://loop.test:%d/", ns.pport), "resolves to 127.0.0.1, a loopback address"},
		{"http://meta.test/latest/meta-data/", "resolves to 169.254.169.254, a cloud-metadata address"},
	} {
		r = netCall(t, s, "python", fmt.Sprintf(`
import urllib.request
urllib.request.urlopen(%q, timeout=10)
`, tc.url), nil, 30)
		info := wantError(t, r, contract.KindForbiddenNetwork, "")
		if !strings.Contains(info.Message, tc.why) || len(r.Network) != 1 || r.Network[0].Rule == "" || r.Network[0].Address != "" {
			t.Fatalf("%s: error %+v network %+v", tc.url, info, r.Network)
		}
	}

	// Node's fetch sees the refusal as an error that says why.
	r = netCall(t, s, "javascript", `fetch('https://undeclared.example/').then(() => console.log('reached'), e => console.log(e.cause.message))`, nil, 30)
	mustOK(t, r)
	if !strings.Contains(r.Stdout, "runbox proxy refused undeclared.example:443: HTTP/1.1 403 Forbidden") {
		t.Fatalf("node: %q %q", r.Stdout, r.Stderr)
	}

	// Raw sockets and DNS still fail: the box has only its loopback,
	// where nothing but the proxy listens.
	r = netCall(t, s, "python", fmt.Sprintf(`
import socket
try:
    socket.getaddrinfo("undeclared.example", 80)
    print("dns resolved")
except OSError as e:
    print("dns failed")
try:
    socket.create_connection(("127.0.0.1", %d), timeout=3)
    print("connected")
except OSError as e:
    print("connect failed")
print(sorted(__import__("os").listdir("/sys/class/net")))
`, ns.pport), nil, 30)
	mustOK(t, r)
	if r.Stdout != "dns failed\nconnect failed\n['lo']\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

// 100 connections at once from one box all go through and are recorded.
func TestNetworkParallel(t *testing.T) {
	ns := startNetServers(t)
	s := engineServer(t, "", ns.manifest(""))
	r := netCall(t, s, "python", fmt.Sprintf(`
import urllib.request
from concurrent.futures import ThreadPoolExecutor
def get(i):
    return urllib.request.urlopen("http://127.0.0.1:%d/slow", timeout=30).read()
with ThreadPoolExecutor(100) as ex:
    print(sum(1 for b in ex.map(get, range(100)) if b == b"slow"))
`, ns.pport), nil, 60)
	mustOK(t, r)
	if strings.TrimSpace(r.Stdout) != "100" || len(r.Network) != 100 {
		t.Fatalf("stdout %q, %d connections", r.Stdout, len(r.Network))
	}
	if m := ns.max.Load(); m < 50 {
		t.Errorf("at most %d requests were in flight at once", m)
	}
	t.Logf("100 connections, at most %d at once at the server, wall %d ms", ns.max.Load(), r.Metrics.WallMs)
}

// The caps bite and say so: a client that drips is cut at the
// connection's time cap; a download past the byte cap is cut.
func TestNetworkCaps(t *testing.T) {
	ns := startNetServers(t)
	s := engineServer(t, "", ns.manifest("  connection_seconds: 2\n  max_bytes: 1MiB\n"))
	r := netCall(t, s, "python", fmt.Sprintf(`
import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
start = time.time()
try:
    s.settimeout(0.2)
    while time.time() - start < 10:
        s.sendall(b"x")
        try:
            if s.recv(100) == b"":
                break
        except socket.timeout:
            pass
except OSError:
    pass
print("cut after %%.0f s" %% (time.time() - start))
`, ns.pport), nil, 30)
	mustOK(t, r)
	if !strings.HasPrefix(r.Stdout, "HTTP/1.1 200 Connection established\ncut after 2 s") {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if len(r.Network) != 1 || r.Network[0].Cut != contract.CutTime || r.Network[0].DurationMs > 3500 {
		t.Fatalf("network %+v", r.Network)
	}

	// An idle tunnel is cut at the cap too, and its record ends there,
	// not when the program lets go of it.
	r = netCall(t, s, "python", fmt.Sprintf(`
import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n")
s.recv(100)
start = time.time()
s.recv(100)
print("closed after %%.0f s" %% (time.time() - start))
time.sleep(3)
`, ns.pport), nil, 30)
	mustOK(t, r)
	if r.Stdout != "closed after 2 s\n" || len(r.Network) != 1 || r.Network[0].Cut != contract.CutTime || r.Network[0].DurationMs > 3000 {
		t.Fatalf("stdout %q network %+v", r.Stdout, r.Network)
	}

	r = netCall(t, s, "python", fmt.Sprintf(`
import urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%d/big?n=4194304", timeout=10).read()
print(len(body))
`, ns.pport), nil, 30)
	if r.Status != contract.StatusError || !strings.Contains(r.Stderr, "IncompleteRead") {
		t.Fatalf("status %s stdout %q stderr %q", r.Status, r.Stdout, r.Stderr)
	}
	c := r.Network[0]
	if c.Cut != contract.CutBytes || !strings.Contains(c.Reason, "network.max_bytes (1MiB)") || c.BytesIn+c.BytesOut > 1<<20 {
		t.Fatalf("network %+v", r.Network)
	}
}

// Under gVisor the same clients work and the same refusals hold, through
// the same channel.
func TestNetworkGVisor(t *testing.T) {
	ns := startNetServers(t)
	s := gvisorServer(t, ns.manifest(""))
	testNetworkClients(t, s, ns)
	testNetworkRefusals(t, s, ns)
}

// Every connection, refused ones included, is a part of the run's audit
// line.
func TestNetworkAudit(t *testing.T) {
	ns := startNetServers(t)
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startServer(t, secretEnv, "--manifest", writeManifest(t, fmt.Sprintf("audit:\n  enabled: true\n  path: %s\n", logPath)+ns.manifest("")))
	t.Cleanup(s.close)
	r := netCall(t, s, "python", fmt.Sprintf(`
import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%d/a", timeout=10).read().decode())
urllib.request.urlopen("http://undeclared.example/", timeout=10)
`, ns.pport), nil, 30)
	wantError(t, r, contract.KindForbiddenNetwork, "")
	e := auditEntry(t, logPath, r.RunID)
	if e.Error == nil || e.Error.Kind != contract.KindForbiddenNetwork || len(e.Network) != 2 ||
		!e.Network[0].Allowed || e.Network[1].Allowed || e.Network[1].Host != "undeclared.example" || !strings.Contains(e.Network[1].Reason, "not declared") {
		t.Fatalf("audit entry: %+v %+v", e.Error, e.Network)
	}
}

// auditEntry is run id's line in the audit log at path.
func auditEntry(t *testing.T, path, id string) audit.Entry {
	t.Helper()
	entries, err := audit.Read(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := audit.Find(entries, id)
	if !ok {
		t.Fatalf("run %s not in the audit log", id)
	}
	return e
}

// On Kubernetes the same: the pod has only lo (runbox's unplug step
// removed the CNI's interface), and declared endpoints are reached
// through the channel alone.
func TestKubeNetwork(t *testing.T) {
	ns := startNetServers(t)
	s := kubeServer(t, ns.manifest(""))
	r := netCall(t, s, "bash", "ls /sys/class/net", nil, 30)
	mustOK(t, r)
	if r.Stdout != "lo\n" {
		t.Fatalf("/sys/class/net: %q", r.Stdout)
	}
	testNetworkClients(t, s, ns)
}

// endpointApprover answers every elicitation with allow, and counts them.
type endpointApprover struct {
	allow bool
	asked atomic.Int64
	last  atomic.Value
}

func (e *endpointApprover) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.asked.Add(1)
	e.last.Store(req.Params.Message)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"allow": e.allow}}}, nil
}

// approve: ask: a client that can ask its user is asked once per call,
// before the run, naming the endpoint; the answer decides; a client that
// cannot ask gets a refusal that says why.
func TestNetworkApprove(t *testing.T) {
	ns := startNetServers(t)
	m := writeManifest(t, fmt.Sprintf("audit:\n  enabled: false\nnetwork:\n  allow:\n    - host: 127.0.0.1\n      ports: [%d]\n      approve: ask\n", ns.pport))
	code := fmt.Sprintf(`
import urllib.request
for i in range(3):
    print(urllib.request.urlopen("http://127.0.0.1:%d/x", timeout=30).read().decode())
`, ns.pport)

	yes := &endpointApprover{allow: true}
	r := netCall(t, startWithElicitor(t, m, yes), "python", code, nil, 60)
	mustOK(t, r)
	if r.Stdout != "GET /x \nGET /x \nGET /x \n" || yes.asked.Load() != 1 || !strings.Contains(yes.last.Load().(string), fmt.Sprintf("127.0.0.1:%d", ns.pport)) {
		t.Fatalf("stdout %q, asked %d: %v", r.Stdout, yes.asked.Load(), yes.last.Load())
	}

	no := &endpointApprover{allow: false}
	r = netCall(t, startWithElicitor(t, m, no), "python", code, nil, 60)
	info := wantError(t, r, contract.KindForbiddenNetwork, "")
	if no.asked.Load() != 1 || !strings.Contains(info.Message, "was not approved: the user did not allow it") {
		t.Fatalf("asked %d, error %+v", no.asked.Load(), info)
	}

	// The harness's usual client declares no elicitation.
	r = netCall(t, startServer(t, secretEnv, "--manifest", m), "python", code, nil, 60)
	info = wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, "needs the user's approval and the client cannot ask for it") {
		t.Fatalf("error %+v", info)
	}
}

// On Podman (its Docker-compatible API) the same clients and refusals.
func TestNetworkPodman(t *testing.T) {
	ns := startNetServers(t)
	s := podmanServer(t, ns.manifest(""))
	testNetworkClients(t, s, ns)
	testNetworkRefusals(t, s, ns)
}

// A pooled box (its interpreter started before the job, numpy and pandas
// preloaded) reaches the endpoints too: the proxy's address does not
// depend on the job, and runbox-init serves it once the job arrives.
func TestNetworkPooled(t *testing.T) {
	ns := startNetServers(t)
	s := engineServer(t, "", ns.manifest("pool:\n  size: 1\n"))
	time.Sleep(3 * time.Second) // the pool fills
	r := netCall(t, s, "python", fmt.Sprintf(pyClient, ns.pport, ns.tport), ns.files(), 30)
	mustOK(t, r)
	if !r.Metrics.Pooled || r.Stdout != "GET /get \nPOST /post hello\nGET /get \nPOST /post hello\n" {
		t.Fatalf("pooled %v stdout %q stderr %q", r.Metrics.Pooled, r.Stdout, r.Stderr)
	}
	checkAllowed(t, r, 4)
}
