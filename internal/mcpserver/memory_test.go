package mcpserver

import (
	"bytes"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// allocatedBy returns the bytes f allocates, the collector off: an upper
// bound on the heap f holds at its peak.
func allocatedBy(f func()) uint64 {
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A large run_code call over streamable HTTP costs about twice its body
// (the body, held once, and the code decoded from it), not mcp-go's five
// times: every byte the server allocates serving it is counted.
func TestLargeCallCostsAboutItsSize(t *testing.T) {
	s := New(manifest.Default(), &echoRunner{}, Options{Version: "test", Transport: TransportHTTP})
	h, _ := s.Handler(HTTPConfig{Transport: TransportHTTP, Token: "x", Logger: discard()})
	body := modernCall(7, "tools/call", map[string]any{"name": "run_code",
		"arguments": map[string]any{"language": "python", "code": "#" + strings.Repeat("x", 8<<20)}}, false)
	w := httptest.NewRecorder()
	n := allocatedBy(func() {
		r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(body))
		for k, v := range map[string]string{"Authorization": "Bearer x", "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_code"} {
			r.Header.Set(k, v)
		}
		h.ServeHTTP(w, r)
	})
	if a := answerOf(t, w.Body.Bytes()); a.kind != "invalid_request" {
		t.Fatalf("an 8 MiB program: %+v, %.300s", a, w.Body.String())
	}
	t.Logf("a %d MiB call allocated %d MiB (%.2fx)", len(body)>>20, n>>20, float64(n)/float64(len(body)))
	if n > uint64(len(body))*5/2 {
		t.Errorf("a %d MiB call allocated %d MiB, more than 2.5x its body", len(body)>>20, n>>20)
	}
}
