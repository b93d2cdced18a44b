package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/tools"
)

// A session-less cancel reaches only its own caller's request.
func TestCancelsBelongToTheirCaller(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	h := newCallerCancels().http(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tools.PrincipalOf(r.Context()) != "alice" {
			return
		}
		close(started)
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(500 * time.Millisecond):
			ended <- nil
		}
	}))
	post := func(who string, msg map[string]any) {
		msg["jsonrpc"] = "2.0"
		msg["params"].(map[string]any)["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
		b, _ := json.Marshal(msg)
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(b))
		r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		holdBody(r, b)
		h.ServeHTTP(httptest.NewRecorder(), r.WithContext(tools.WithPrincipal(context.Background(), who)))
	}
	call := map[string]any{"id": 1, "method": "tools/call", "params": map[string]any{"name": "run_code"}}
	cancel := map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": 1}}

	go post("alice", call)
	<-started
	post("bob", cancel)
	if err := <-ended; err != nil {
		t.Fatalf("bob's cancel reached alice's call: %v", err)
	}
	started = make(chan struct{})
	go post("alice", call)
	<-started
	post("alice", cancel)
	if err := <-ended; err == nil {
		t.Fatal("alice's own cancel missed her call")
	}
}
