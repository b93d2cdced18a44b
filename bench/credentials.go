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
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// credGetScript fetches url n+1 times over HTTPS, each on a new
// connection, trusting the CA bundle it is given, and prints the
// milliseconds of each but the first.
const credGetScript = `
import ssl, sys, time, urllib.request
url, n, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)
for i in range(n + 1):
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=30, context=ctx).read()
    ms = (time.perf_counter() - t) * 1000
    assert body == b"x" * 1024, body[:100]
    if i:
        print("%.2f" % ms)
`

// credentialRows measures a 1 KiB HTTPS GET from a box to an entry with a
// credential (the proxy ends the box's TLS, adds the header, makes its own
// TLS connection on) against the same GET to an entry without one (TLS
// end to end through the tunnel), in the same run and the same server.
func credentialRows(bin, dir string, n int) []row {
	const token = "bench-token-0123456789"
	body := []byte(strings.Repeat("x", 1024))
	serve := func(needToken bool) *httptest.Server {
		return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if needToken && r.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
		}))
	}
	with, without := serve(true), serve(false)
	defer with.Close()
	defer without.Close()
	prog := "HTTPS GET of 1 KiB (python urllib, new connection each)"
	fail := func(err error) []row {
		return []row{{Program: prog, Name: "credential added by the proxy", Concurrency: 1, N: n, Failure: err.Error()}}
	}
	// The server trusts the test servers' certificates as it would a
	// public CA's; runbox's own CA is made in a state directory of its own.
	caFile := dir + "/upstream-ca.pem"
	var ca []byte
	for _, s := range []*httptest.Server{with, without} {
		ca = append(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})...)
	}
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		return fail(err)
	}
	for k, v := range map[string]string{"RUNBOX_BENCH_TOKEN": token, "SSL_CERT_FILE": caFile, "XDG_STATE_HOME": dir + "/state"} {
		if old, ok := os.LookupEnv(k); ok {
			defer os.Setenv(k, old)
		} else {
			defer os.Unsetenv(k)
		}
		os.Setenv(k, v)
	}
	port := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Port() }
	m := dir + "/credentials.yaml"
	_ = os.WriteFile(m, []byte(fmt.Sprintf(`network:
  allow:
    - host: 127.0.0.1
      ports: [%s]
      credential: {env: RUNBOX_BENCH_TOKEN}
    - host: 127.0.0.1
      ports: [%s]
  max_bytes: 1GiB
`, port(with), port(without))), 0o644)
	c, err := startRunbox(bin, m)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	run := func(name, target string) row {
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_code"
		req.Params.Arguments = map[string]any{"language": "bash", "timeout_seconds": 120,
			"code":  fmt.Sprintf("cat \"$SSL_CERT_FILE\" ca.pem > /tmp/all.pem && python3 get.py %s %d /tmp/all.pem", target, n),
			"files": []map[string]any{{"path": "ca.pem", "content": string(ca)}, {"path": "get.py", "content": credGetScript}}}
		res, err := c.CallTool(context.Background(), req)
		var sc struct{ Status, Stdout, Stderr string }
		if err == nil {
			raw, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(raw, &sc)
			if res.IsError {
				err = fmt.Errorf("run_code failed: %.300s", raw)
			}
		}
		return samples(prog, name, sc.Stdout, err)
	}
	return []row{
		run("credential added by the proxy (TLS ended and remade)", with.URL+"/1KiB"),
		run("no credential (TLS end to end through the tunnel)", without.URL+"/1KiB"),
	}
}
