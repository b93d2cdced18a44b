package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// send serves one request on path with the Origin and Authorization given
// ("" leaves a header out) and returns the status. A GET of the SSE stream
// is cut after a moment: only whether it was let through matters.
func send(t *testing.T, h http.Handler, method, path, origin, auth string) (int, string) {
	t.Helper()
	var r *http.Request
	if method == http.MethodPost {
		r = httptest.NewRequest(method, path, strings.NewReader(initBody))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		r = httptest.NewRequest(method, path, nil)
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		t.Cleanup(cancel)
		r = r.WithContext(ctx)
	}
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// mcpRequests are a request on every MCP path of each transport.
var mcpRequests = map[string][][2]string{
	TransportHTTP: {{http.MethodPost, PathMCP}},
	TransportSSE:  {{http.MethodGet, PathSSE}, {http.MethodPost, PathMessage}},
}

// TestForeignOriginIsRefusedOnEveryMCPPath: a browser page of another
// origin (DNS rebinding, or a page POSTing to localhost) gets 403 on every
// MCP path, with or without the right token, before the token is looked at.
func TestForeignOriginIsRefusedOnEveryMCPPath(t *testing.T) {
	s := server.NewMCPServer("t", "1")
	for _, token := range []string{"", "x"} {
		for tr, reqs := range mcpRequests {
			h, _ := bare(s).Handler(HTTPConfig{Transport: tr, Addr: "127.0.0.1:8080", Token: token})
			for _, req := range reqs {
				for _, auth := range []string{"", "Bearer x", "Bearer wrong"} {
					for _, origin := range []string{"http://evil.example", "http://evil.example:8080", "null", "http://127.0.0.1:8081", "https://127.0.0.1:8080", "http://localhost"} {
						code, body := send(t, h, req[0], req[1], origin, auth)
						if code != http.StatusForbidden {
							t.Errorf("token %q, %s %s %s, Origin %s, %q: got %d, want 403", token, tr, req[0], req[1], origin, auth, code)
							continue
						}
						if !strings.Contains(body, origin) || !strings.Contains(body, "allowed_origins") {
							t.Errorf("403 body does not say which origin and how to declare it: %q", body)
						}
					}
				}
			}
		}
	}
}

// TestOwnOriginAndNoOriginPass: the listener's own origin (and, on a
// loopback listener, its localhost equivalents) and requests without an
// Origin (non-browser clients) reach the transport.
func TestOwnOriginAndNoOriginPass(t *testing.T) {
	s := server.NewMCPServer("t", "1")
	cases := map[string][]string{
		"127.0.0.1:8080": {"", "http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "HTTP://LocalHost:8080"},
		"localhost:8080": {"", "http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"},
		"[::1]:8080":     {"", "http://[::1]:8080", "http://localhost:8080"},
		"10.1.2.3:8080":  {"", "http://10.1.2.3:8080"},
		"0.0.0.0:8080":   {"", "http://localhost:8080", "http://127.0.0.1:8080"},
	}
	for addr, origins := range cases {
		for tr, reqs := range mcpRequests {
			h, _ := bare(s).Handler(HTTPConfig{Transport: tr, Addr: addr, Token: "x"})
			for _, req := range reqs {
				for _, origin := range origins {
					if code, body := send(t, h, req[0], req[1], origin, "Bearer x"); code == http.StatusForbidden || code == http.StatusUnauthorized {
						t.Errorf("listener %s, %s %s %s, Origin %q: got %d %q", addr, tr, req[0], req[1], origin, code, body)
					}
				}
				// The token is still asked for.
				if code, _ := send(t, h, req[0], req[1], "http://localhost:8080", ""); code != http.StatusUnauthorized && addr != "10.1.2.3:8080" {
					t.Errorf("listener %s, %s %s: own origin without a token got %d, want 401", addr, tr, req[1], code)
				}
			}
		}
	}
	// A non-loopback listener's origin is its own address only.
	h, _ := bare(s).Handler(HTTPConfig{Transport: TransportHTTP, Addr: "10.1.2.3:8080"})
	if code, _ := send(t, h, http.MethodPost, PathMCP, "http://localhost:8080", ""); code != http.StatusForbidden {
		t.Errorf("10.1.2.3:8080 let in Origin http://localhost:8080: %d", code)
	}
}

// TestHealthzIgnoresOrigin: probes are not MCP and are never refused.
func TestHealthzIgnoresOrigin(t *testing.T) {
	h, _ := bare(server.NewMCPServer("t", "1")).Handler(HTTPConfig{Transport: TransportHTTP, Addr: "127.0.0.1:8080", Token: "x"})
	if code, _ := send(t, h, http.MethodGet, PathHealth, "http://evil.example", ""); code != http.StatusOK {
		t.Fatalf("/healthz with a foreign Origin: %d", code)
	}
}

// TestDeclaredOriginsPass: an origin declared in the manifest passes, in
// any spelling of the same origin; its neighbours do not.
func TestDeclaredOriginsPass(t *testing.T) {
	s := server.NewMCPServer("t", "1")
	declared := []string{"https://runbox.example.com", "http://Tools.Example:8443"}
	for tr, reqs := range mcpRequests {
		h, _ := bare(s).Handler(HTTPConfig{Transport: tr, Addr: "127.0.0.1:8080", Token: "x", AllowedOrigins: declared})
		for _, req := range reqs {
			for origin, want := range map[string]bool{
				"https://runbox.example.com":      true,
				"https://runbox.example.com:443":  true,
				"HTTPS://RUNBOX.EXAMPLE.COM":      true,
				"http://tools.example:8443":       true,
				"http://runbox.example.com":       false,
				"https://runbox.example.com:444":  false,
				"https://evil.runbox.example.com": false,
				"http://tools.example":            false,
			} {
				code, _ := send(t, h, req[0], req[1], origin, "Bearer x")
				if (code != http.StatusForbidden) != want {
					t.Errorf("%s %s %s, Origin %s: got %d, want allowed=%v", tr, req[0], req[1], origin, code, want)
				}
			}
		}
	}
}

// TestOriginOfTheListenerAsConfiguredAndAsBound: a listener asked for by
// host name or for port 0 is its own origin under the name it was given
// and under the address and port it was bound to.
func TestOriginOfTheListenerAsConfiguredAndAsBound(t *testing.T) {
	p := newOriginPolicy([]string{"runbox.internal:8080", "10.0.0.5:8080"}, nil, nil)
	for _, o := range []string{"http://runbox.internal:8080", "http://10.0.0.5:8080"} {
		if !p.allowed[o] {
			t.Errorf("%s is the listener's own origin", o)
		}
	}
	if p.own != "http://runbox.internal:8080" {
		t.Errorf("refusals name %s, want the address as configured", p.own)
	}
	p = newOriginPolicy([]string{"127.0.0.1:0", "127.0.0.1:41234"}, nil, nil)
	if !p.allowed["http://localhost:41234"] || len(p.allowed) != 3 || p.own != "http://127.0.0.1:41234" {
		t.Errorf("a :0 listener: own %s, allowed %v", p.own, p.allowed)
	}
}

func TestCanonicalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:8080":        "http://localhost:8080",
		"HTTP://LOCALHOST:8080":        "http://localhost:8080",
		"http://127.0.0.1":             "http://127.0.0.1:80",
		"https://example.com":          "https://example.com:443",
		"http://[::1]:08080":           "http://[::1]:8080",
		"http://[0:0:0:0:0:0:0:1]:9":   "http://[::1]:9",
		"http://[::ffff:127.0.0.1]:80": "http://127.0.0.1:80",
	} {
		if got, ok := canonicalOrigin(in); !ok || got != want {
			t.Errorf("%s: got %q %v, want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "null", "*", "example.com", "file:///x", "ftp://example.com", "https://example.com/", "https://example.com/app",
		"https://example.com?x", "https://example.com#x", "https://u:p@example.com", "https://example.com:0", "https://example.com:65536", "https://example.com:x", "https://"} {
		if got, ok := canonicalOrigin(bad); ok {
			t.Errorf("%q is not an origin, got %q", bad, got)
		}
		if bad != "" && CheckOrigins([]string{"https://ok.example", bad}) == nil {
			t.Errorf("CheckOrigins accepted %q", bad)
		}
	}
}
