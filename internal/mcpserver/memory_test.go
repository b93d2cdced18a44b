package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

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

// The same over the SSE transport, whose answers come on the session's
// event stream.
func TestLargeSSECallCostsAboutItsSize(t *testing.T) {
	h, shutdown := New(manifest.Default(), &echoRunner{}, Options{Version: "test", Transport: TransportSSE}).Handler(
		HTTPConfig{Transport: TransportSSE, Addr: "127.0.0.1:0", Token: "x"})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer func() { _ = shutdown(context.Background()) }()
	req, _ := http.NewRequest("GET", srv.URL+PathSSE, nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	endpoint, answers := make(chan string, 1), make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for event := ""; sc.Scan(); {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event:"); ok {
				event = strings.TrimSpace(e)
			} else if data, ok := strings.CutPrefix(line, "data:"); ok && event == "endpoint" {
				endpoint <- strings.TrimSpace(data)
			} else if ok {
				answers <- strings.TrimSpace(data)
			}
		}
	}()
	var messages string
	select {
	case messages = <-endpoint:
	case <-time.After(10 * time.Second):
		t.Fatal("no endpoint event")
	}
	body := modernCall(7, "tools/call", map[string]any{"name": "run_code",
		"arguments": map[string]any{"language": "python", "code": "#" + strings.Repeat("x", 8<<20)}}, false)
	var answer string
	n := allocatedBy(func() {
		req, _ := http.NewRequest("POST", srv.URL+messages, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer x")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case answer = <-answers:
		case <-time.After(time.Minute):
			t.Fatal("no answer on the stream")
		}
	})
	if a := answerOf(t, []byte(answer)); a.kind != "invalid_request" {
		t.Fatalf("an 8 MiB program: %+v, %.300s", a, answer)
	}
	t.Logf("a %d MiB call allocated %d MiB (%.2fx)", len(body)>>20, n>>20, float64(n)/float64(len(body)))
	if n > uint64(len(body))*5/2 {
		t.Errorf("a %d MiB call allocated %d MiB, more than 2.5x its body", len(body)>>20, n>>20)
	}
}
