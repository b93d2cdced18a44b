//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// modernPost posts one message of protocol 2026-07-28 with a token and
// returns the HTTP status and body: a call's answer, or nothing.
func modernPost(t *testing.T, url, token string, msg map[string]any) (int, []byte) {
	t.Helper()
	params, _ := msg["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
		msg["params"] = params
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "runbox-e2e-limits", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}
	msg["jsonrpc"] = "2.0"
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", msg["method"].(string))
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Errorf("%s: %v", msg["method"], err)
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// answerOf reads a run_code answer out of a POST's JSON or event stream.
func answerOf(raw []byte) (contract.Result, bool) {
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "data:"))
		var a struct {
			Result struct {
				Structured contract.Result `json:"structuredContent"`
			} `json:"result"`
		}
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &a) == nil && a.Result.Structured.Status != "" {
			return a.Result.Structured, true
		}
	}
	return contract.Result{}, false
}

// Over protocol 2026-07-28 (no session) a notifications/cancelled belongs
// to its caller: bob's cancels for every small request id, numbers and
// strings, leave alice's running call alone; alice's own cancel still
// ends hers, and its box.
func TestCancelsBelongToTheCaller(t *testing.T) {
	s, alice, bob := aliceAndBob(t)
	ofServer := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(s.cmd.Process.Pid)
	call := func(id any, code string) map[string]any {
		return map[string]any{"id": id, "method": "tools/call", "params": map[string]any{"name": "run_code",
			"arguments": map[string]any{"language": "python", "code": code, "timeout_seconds": 120}}}
	}
	cancelAll := func(token string, ids []any) {
		for _, id := range ids {
			modernPost(t, s.url("http"), token, map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": id, "reason": "e2e"}})
		}
	}
	waitBox := func() {
		deadline := time.Now().Add(2 * time.Minute)
		for len(boxes(ofServer, "status=running")) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no box started\n%s", s.stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // the program is in its sleep
	}

	done := make(chan []byte, 1)
	go func() {
		_, raw := modernPost(t, s.url("http"), alice, call(7, "import time\ntime.sleep(4)\nprint('alice done')"))
		done <- raw
	}()
	waitBox()
	var ids []any
	for i := range 64 {
		ids = append(ids, i, strconv.Itoa(i))
	}
	cancelAll(bob, ids)
	raw := <-done
	if r, ok := answerOf(raw); !ok || r.Status != contract.StatusOK || r.Stdout != "alice done\n" {
		t.Fatalf("alice's call after bob's cancels: %+v\n%s", r.Error, raw)
	}

	// Alice's own cancel ends her call: the POST ends and the box goes
	// well before the program's 100 s.
	go func() {
		_, raw := modernPost(t, s.url("http"), alice, call("mine", "import time\ntime.sleep(100)"))
		done <- raw
	}()
	waitBox()
	start := time.Now()
	cancelAll(alice, []any{"mine"})
	select {
	case raw := <-done:
		if r, ok := answerOf(raw); ok && r.Status == contract.StatusOK {
			t.Fatalf("alice's cancelled call answered ok: %s", raw)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("alice's own cancel did not end her call")
	}
	if left := waitNoBoxes(30*time.Second, ofServer); len(left) > 0 {
		t.Fatalf("boxes of the cancelled call left: %v", left)
	}
	t.Logf("alice's own cancel ended her call in %v", time.Since(start).Round(time.Millisecond))
}

// dialHead opens a connection to s and writes a request head (and
// whatever follows it in rest).
func dialHead(t *testing.T, s *netServer, head string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if head != "" {
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// statusWithin reads the status line the server answers on c within d,
// then how long the server keeps c open after it (up to d): "" when no
// answer came.
func statusWithin(c net.Conn, d time.Duration) (status string, openFor time.Duration) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", 0
	}
	answered := time.Now()
	_, _ = io.Copy(io.Discard, br) // to EOF, or the deadline
	return strings.TrimSpace(line), time.Since(answered)
}

// drip writes a byte a second to c until the returned stop is called.
func drip(c net.Conn) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
				_, _ = c.Write([]byte(" "))
			}
		}
	}()
	return func() { close(done) }
}

// writeChunks writes n chunks of 64 KiB of a chunked body to c.
func writeChunks(c net.Conn, n int) {
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat(" ", 64<<10))
	for range n {
		if _, err := io.WriteString(c, chunk); err != nil {
			return
		}
	}
}

// closedWithin reports whether the server closes c, unasked, within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !errors.As(err, &ne) || !ne.Timeout()
}

// authedOpen opens a connection to s that shows the token and stays open.
func authedOpen(t *testing.T, s *netServer) net.Conn {
	t.Helper()
	c := dialHead(t, s, "GET /metrics HTTP/1.1\r\nHost: "+s.addr+"\r\nAuthorization: Bearer "+testToken+"\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("an authenticated request: %q %v", line, err)
	}
	return c
}

// refusedCounts reads runbox_http_refused_total by reason from /metrics.
func refusedCounts(t *testing.T, s *netServer) map[string]int {
	t.Helper()
	counts := map[string]int{}
	metrics := get(t, "http://"+s.addr+"/metrics", testToken, http.StatusOK)
	for _, m := range regexp.MustCompile(`runbox_http_refused_total\{reason="([a-z_]+)"\} (\d+)`).FindAllStringSubmatch(metrics, -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	return counts
}

// Connections without a token cost the server almost nothing: one that
// announces a body and drips it gets its 401 at once and is closed, and
// so is one left idle after its 401; past the caps on connections from
// one address and on unauthenticated ones, a new connection is closed as
// it comes, while one that showed a token does not count. Each refusal
// is in /metrics and the log.
func TestUnauthenticatedConnectionsAreBounded(t *testing.T) {
	m := writeManifest(t, "audit:\n  enabled: false\nhttp:\n  max_connections_per_address: 40\n  max_unauthenticated_connections: 30\n")
	s := startNetServer(t, "http", "--manifest", m)
	post := "POST /mcp HTTP/1.1\r\nHost: " + s.addr + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"

	t.Run("a dripped body", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var slowest time.Duration
		for range 20 {
			c := dialHead(t, s, post)
			wg.Go(func() {
				defer drip(c)()
				start := time.Now()
				status, open := statusWithin(c, 15*time.Second)
				if !strings.Contains(status, " 401 ") || open > 5*time.Second {
					t.Errorf("a dripped unauthenticated body: status %q, open %v after it", status, open)
				}
				mu.Lock()
				slowest = max(slowest, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		t.Logf("20 dripping connections: the last answered and closed after %v", slowest.Round(time.Millisecond))
	})

	t.Run("idle after a 401", func(t *testing.T) {
		c := dialHead(t, s, "GET /mcp HTTP/1.1\r\nHost: "+s.addr+"\r\n\r\n")
		start := time.Now()
		status, open := statusWithin(c, 15*time.Second)
		if !strings.Contains(status, " 401 ") || open > 5*time.Second {
			t.Fatalf("an idle connection after its 401: status %q, open %v after it", status, open)
		}
		t.Logf("closed %v after the request", time.Since(start).Round(time.Millisecond))
	})

	t.Run("the caps", func(t *testing.T) {
		// A connection that showed a token counts for its address only.
		authed := authedOpen(t, s)
		var held []net.Conn
		for range 30 {
			held = append(held, dialHead(t, s, ""))
		}
		time.Sleep(200 * time.Millisecond)
		if c := dialHead(t, s, ""); !closedWithin(c, 3*time.Second) {
			t.Fatal("a connection past max_unauthenticated_connections was kept")
		}
		for _, c := range held[:10] {
			_ = c.Close()
		}
		time.Sleep(200 * time.Millisecond)
		held = held[10:]
		for range 9 { // 1 + 29 unauthenticated from this address
			held = append(held, dialHead(t, s, ""))
		}
		time.Sleep(200 * time.Millisecond)
		for i, c := range held {
			if closedWithin(c, 20*time.Millisecond) {
				t.Fatalf("connection %d within the caps was closed", i)
			}
		}
		for range 10 { // 40 from this address: the cap
			held = append(held, authedOpen(t, s))
		}
		if c := dialHead(t, s, ""); !closedWithin(c, 3*time.Second) {
			t.Fatal("a connection past max_connections_per_address was kept")
		}
		for _, c := range held {
			_ = c.Close()
		}
		_ = authed.Close()
	})

	time.Sleep(300 * time.Millisecond)
	got := refusedCounts(t, s)
	for reason, least := range map[string]int{"unauthorized": 21, "unauthenticated_connections": 1, "connections_per_address": 1} {
		if got[reason] < least {
			t.Errorf("/metrics: %d refusals %s, want at least %d (%v)", got[reason], reason, least, got)
		}
		if !strings.Contains(s.stderr.String(), "reason="+reason) && !strings.Contains(s.stderr.String(), `"reason":"`+reason+`"`) {
			t.Errorf("no log line of a refusal %s", reason)
		}
	}
}

// A request body is bounded by http.max_request_bytes: past it, a 413
// before the body is read (announced) or as soon as it proves larger
// (chunked), counted and logged; under it, the server's peak memory grows
// by about twice the body's size (the body and the call decoded from it),
// not a larger multiple of it.
func TestRequestBodiesAreBounded(t *testing.T) {
	m := writeManifest(t, "audit:\n  enabled: false\nhttp:\n  max_request_bytes: 1MiB\n")
	s := startNetServer(t, "http", "--manifest", m)
	head := "POST /mcp HTTP/1.1\r\nHost: " + s.addr + "\r\nAuthorization: Bearer " + testToken + "\r\nContent-Type: application/json\r\n"

	t.Run("announced", func(t *testing.T) {
		c := dialHead(t, s, head+"Content-Length: 2097152\r\n\r\n{")
		start := time.Now()
		if status, open := statusWithin(c, 10*time.Second); !strings.Contains(status, " 413 ") || open > 5*time.Second {
			t.Fatalf("a body announced past the limit: status %q, open %v after it", status, open)
		}
		t.Logf("413 after %v", time.Since(start).Round(time.Millisecond))
	})
	t.Run("chunked", func(t *testing.T) {
		c := dialHead(t, s, head+"Transfer-Encoding: chunked\r\n\r\n")
		go writeChunks(c, 40)
		if status, _ := statusWithin(c, 10*time.Second); !strings.Contains(status, " 413 ") {
			t.Fatalf("a chunked body past the limit: status %q", status)
		}
	})
	if got := refusedCounts(t, s); got["body_too_large"] < 2 {
		t.Errorf("/metrics: %v", got)
	}

	t.Run("memory", func(t *testing.T) {
		// The default limit (64 MiB); a 48 MiB call, answered
		// invalid_request (past max_code_bytes) without a box.
		s := startNetServer(t, "http", "--manifest", writeManifest(t, "audit:\n  enabled: false\n"))
		size := 48 << 20
		modernPost(t, s.url("http"), testToken, map[string]any{"id": 1, "method": "tools/call", "params": map[string]any{"name": "run_code",
			"arguments": map[string]any{"language": "python", "code": "print(1)"}}})
		before := int64(procStatusKiB(t, s.cmd.Process.Pid, "VmHWM")) << 10
		status, raw := modernPost(t, s.url("http"), testToken, map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "run_code",
			"arguments": map[string]any{"language": "python", "code": "#" + strings.Repeat("x", size)}}})
		grew := int64(procStatusKiB(t, s.cmd.Process.Pid, "VmHWM"))<<10 - before
		r, ok := answerOf(raw)
		if status != http.StatusOK || !ok || r.Error == nil || r.Error.Kind != contract.KindInvalidRequest {
			t.Fatalf("a 48 MiB call: HTTP %d %.300s", status, raw)
		}
		// A large call that runs: its arguments reach the box whole.
		data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe, 0, 'x'}, 1<<20))
		status, raw = modernPost(t, s.url("http"), testToken, map[string]any{"id": 3, "method": "tools/call", "params": map[string]any{"name": "run_code",
			"arguments": map[string]any{"language": "python", "code": "import hashlib\nprint(hashlib.sha256(open('in.bin','rb').read()).hexdigest())",
				"files": []map[string]any{{"path": "in.bin", "content": data, "encoding": "base64"}}}}})
		sum := sha256.Sum256(bytes.Repeat([]byte{0xfe, 0, 'x'}, 1<<20))
		if r, ok := answerOf(raw); status != http.StatusOK || !ok || r.Stdout != hex.EncodeToString(sum[:])+"\n" {
			t.Fatalf("a 4 MiB call with a file: HTTP %d %.300s", status, raw)
		}
		t.Logf("a %d MiB body raised the server's peak memory by %d MiB (%.1fx)", size>>20, grew>>20, float64(grew)/float64(size))
		// The body held once and the code decoded from it: 2x. mcp-go
		// never sees the arguments of so large a call (its own copies
		// made it 5x); the margin is the collector's, whose timing a
		// loaded machine shifts.
		if grew > int64(3*size) {
			t.Fatalf("a %d MiB body raised the server's peak memory by %d MiB, more than 3x", size>>20, grew>>20)
		}
	})
}

// A call that answers after more than a minute, past every timeout of
// the listener (the idle one, a write's), still answers. It waits on its
// program's clock, beside other tests: its server is its own, on a port
// of its own.
func TestLongAnswerOutlivesTheListenerTimeouts(t *testing.T) {
	t.Parallel()
	s := startNetServer(t, "http", "--manifest", writeManifest(t, "audit:\n  enabled: false\nlimits:\n  answer_within_seconds: 0\n"))
	status, raw := modernPost(t, s.url("http"), testToken, map[string]any{"id": 1, "method": "tools/call", "params": map[string]any{"name": "run_code",
		"arguments": map[string]any{"language": "python", "code": "import time\ntime.sleep(75)\nprint('late')", "timeout_seconds": 120}}})
	if r, ok := answerOf(raw); status != http.StatusOK || !ok || r.Stdout != "late\n" {
		t.Fatalf("a 75 s call: HTTP %d %s", status, raw)
	}
}
