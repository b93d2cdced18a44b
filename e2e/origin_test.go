//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// TestHTTPOriginCheck: the real server refuses a browser request from a
// foreign Origin with 403 on every MCP path, whatever the token (DNS
// rebinding, or a page posting to localhost); its own origin, a declared
// one and requests without Origin (non-browser clients) get through, and a
// client sending the declared Origin runs code.
func TestHTTPOriginCheck(t *testing.T) {
	const declared = "https://runbox.example.com"
	p := writeManifest(t, "http:\n  allowed_origins: [\""+declared+"\"]\n")
	for _, tr := range []string{"http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			s := startNetServer(t, tr, "--manifest", p)
			_, port, _ := net.SplitHostPort(s.addr)
			// ask sends one request on path and returns the status and
			// the start of the body; the SSE stream is cut once its
			// headers are in.
			ask := func(method, path, origin, token string) (int, string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, method, "http://"+s.addr+path,
					strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if origin != "" {
					req.Header.Set("Origin", origin)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", method, path, err, s.stderr)
				}
				defer resp.Body.Close()
				body := make([]byte, 512)
				n, _ := io.ReadAtLeast(resp.Body, body, 1)
				return resp.StatusCode, string(body[:n])
			}
			paths := [][2]string{{http.MethodPost, "/mcp"}}
			if tr == "sse" {
				paths = [][2]string{{http.MethodGet, "/sse"}, {http.MethodPost, "/message"}}
			}
			for _, mp := range paths {
				for _, origin := range []string{"http://evil.example", "http://evil.example:" + port, "null", "http://127.0.0.1:1"} {
					for _, token := range []string{testToken, "wrong", ""} {
						code, body := ask(mp[0], mp[1], origin, token)
						if code != http.StatusForbidden || !strings.Contains(body, "allowed_origins") {
							t.Errorf("%s %s, Origin %s, token %q: %d %q; want 403 saying how to declare an origin", mp[0], mp[1], origin, token, code, body)
						}
					}
				}
			}
			if tr == "http" {
				for _, origin := range []string{"", "http://" + s.addr, "http://localhost:" + port, declared} {
					if code, body := ask(http.MethodPost, "/mcp", origin, testToken); code != http.StatusOK {
						t.Errorf("POST /mcp, Origin %q: %d %q; want 200", origin, code, body)
					}
				}
				// Own origin and no origin still need the token.
				if code, _ := ask(http.MethodPost, "/mcp", "http://"+s.addr, ""); code != http.StatusUnauthorized {
					t.Errorf("own origin without a token: %d, want 401", code)
				}
			} else {
				for _, origin := range []string{"", "http://" + s.addr, "http://localhost:" + port, declared} {
					if code, body := ask(http.MethodGet, "/sse", origin, testToken); code != http.StatusOK {
						t.Errorf("GET /sse, Origin %q: %d %q; want 200", origin, code, body)
					}
				}
			}
			if code, _ := ask(http.MethodGet, "/healthz", "http://evil.example", ""); code != http.StatusOK {
				t.Errorf("/healthz with a foreign Origin: %d", code)
			}

			// A client sending the declared Origin works end to end.
			headers := map[string]string{"Authorization": "Bearer " + testToken, "Origin": declared}
			var c *client.Client
			var err error
			if tr == "sse" {
				c, err = client.NewSSEMCPClient(s.url(tr), client.WithHeaders(headers))
			} else {
				c, err = client.NewStreamableHttpClient(s.url(tr), transport.WithHTTPHeaders(headers))
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if err := c.Start(context.Background()); err != nil {
				t.Fatalf("start: %v\n%s", err, s.stderr)
			}
			if err := initialize(c); err != nil {
				t.Fatalf("initialize with Origin %s: %v\n%s", declared, err, s.stderr)
			}
			r := callOn(t, c, map[string]any{"language": "python", "code": "print(6*7)"})
			mustOK(t, r)
			if r.Stdout != "42\n" {
				t.Fatalf("stdout %q", r.Stdout)
			}
		})
	}
}
