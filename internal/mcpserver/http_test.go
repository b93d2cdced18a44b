package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestBearer(t *testing.T) {
	h := bearerNamed(HTTPConfig{Token: "s3cret"}.tokenSet(), newRefusals(nil, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for auth, want := range map[string]int{"": 401, "Bearer wrong": 401, "s3cret": 401, "Bearer s3cret": 204, "Bearer s3cret2": 401} {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader("{}"))
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("%q: got %d, want %d", auth, w.Code, want)
		}
		if w.Code == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%q: no WWW-Authenticate", auth)
		}
	}
}

func TestCheckListen(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:9": true, "0.0.0.0:8080": false, ":8080": false, "10.1.2.3:80": false} {
		if err := CheckListen(addr, ""); (err == nil) != ok {
			t.Errorf("%s without a token: %v", addr, err)
		}
		if err := CheckListen(addr, "t"); err != nil {
			t.Errorf("%s with a token: %v", addr, err)
		}
	}
}

func TestHandlerGuardsEveryMCPPath(t *testing.T) {
	s := server.NewMCPServer("t", "1")
	for _, tr := range []string{TransportHTTP, TransportSSE} {
		h, _ := bare(s).Handler(HTTPConfig{Transport: tr, Token: "x"})
		for _, p := range []string{PathMCP, PathSSE, PathMessage} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
			if w.Code != 401 && w.Code != 404 {
				t.Errorf("%s %s: %d without a token", tr, p, w.Code)
			}
		}
	}
}

// ServeHTTP serves until its context ends, then shuts down and closes the
// server; closing it again does nothing.
func TestServeHTTPClosesTheServer(t *testing.T) {
	s := New(manifest.Default(), &echoRunner{}, Options{Version: "test", Transport: TransportHTTP})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.ServeHTTP(ctx, HTTPConfig{Transport: TransportHTTP, Addr: "127.0.0.1:0", Logger: discard()}); err != nil {
		t.Fatal(err)
	}
	s.Close()
}
