package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// getScript fetches url n+1 times over HTTPS, each on a new connection
// (a new tunnel through the proxy, a new TLS handshake), and prints the
// milliseconds of each but the first (the warm-up), timed by the program
// itself: what the program sees, without the run around it.
const getScript = `
import os, ssl, sys, time, urllib.request
os.environ["SSL_CERT_FILE"] = "ca.pem"
url, n = sys.argv[1], int(sys.argv[2])
for i in range(n + 1):
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=30).read()
    ms = (time.perf_counter() - t) * 1000
    assert len(body) == 1048576, len(body)
    if i:
        print("%.2f" % ms)
`

// networkRows measures an allowed 1 MiB HTTPS GET made by a Python
// program through the box's proxy (runbox-init, the channel, the
// server's egress proxy) against the same program on the host making the
// same GET directly, in the same run; then credentialRows.
func networkRows(bin, dir string, n int) []row {
	body := oneMiB
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	target := srv.URL + "/1MiB"
	prog := "HTTPS GET of 1 MiB (python urllib, new connection each)"
	fail := func(name string, err error) row {
		return row{Program: prog, Name: name, Concurrency: 1, N: n, Failure: err.Error()}
	}

	m := dir + "/network.yaml"
	_ = os.WriteFile(m, []byte(fmt.Sprintf("network:\n  allow:\n    - host: 127.0.0.1\n      ports: [%s]\n  max_bytes: 1GiB\n", u.Port())), 0o644)
	c, err := startRunbox(bin, m)
	if err != nil {
		return []row{fail("through the box's proxy", err)}
	}
	defer c.Close()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"language": "bash", "timeout_seconds": 120,
		"code":  fmt.Sprintf("python3 get.py %s %d", target, n),
		"files": []map[string]any{{"path": "ca.pem", "content": ca}, {"path": "get.py", "content": getScript}}}
	res, err := c.CallTool(context.Background(), req)
	var sc struct{ Status, Stdout, Stderr string }
	if err == nil {
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &sc)
		if res.IsError {
			err = fmt.Errorf("run_code failed: %.300s", raw)
		}
	}
	boxed := samples(prog, "through the box's proxy (runbox-init, channel, egress)", sc.Stdout, err)

	hostDir, _ := os.MkdirTemp(dir, "host-")
	_ = os.WriteFile(hostDir+"/ca.pem", []byte(ca), 0o644)
	_ = os.WriteFile(hostDir+"/get.py", []byte(getScript), 0o644)
	cmd := exec.Command("python3", "get.py", target, strconv.Itoa(n))
	cmd.Dir = hostDir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	host := samples(prog, "from the host, directly", string(out), err)
	// And a credential added on the way out against none (credentials.go).
	return append([]row{boxed, host}, credentialRows(bin, dir, n)...)
}

// samples turns the program's printed milliseconds into a row.
func samples(prog, name, stdout string, err error) row {
	r := row{Program: prog, Name: name, Concurrency: 1}
	if err != nil {
		r.Failure = err.Error()
		return r
	}
	var ms []float64
	for _, l := range strings.Fields(stdout) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			r.Failure = "unexpected output: " + l
			return r
		}
		ms = append(ms, v)
	}
	if len(ms) == 0 {
		r.Failure = "no samples"
		return r
	}
	slices.Sort(ms)
	var sum float64
	for _, v := range ms {
		sum += v
	}
	r.N = len(ms)
	r.P50Ms, r.P95Ms, r.P99Ms = pct(ms, 0.50), pct(ms, 0.95), pct(ms, 0.99)
	r.RunsPerSec = float64(len(ms)) / (sum / 1000)
	return r
}
