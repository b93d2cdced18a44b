//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// legacyClient is an MCP client of protocol 2025-11-25 (the initialize
// handshake, a session) on transport tr with a token, and where its
// messages go: the streamable endpoint and its Mcp-Session-Id, or the
// SSE session's message URL.
func legacyClient(t *testing.T, s *netServer, tr, token string) (c *client.Client, post, session string) {
	t.Helper()
	c = s.clientAs(t, tr, token, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	if tr == "sse" {
		return c, c.GetTransport().(*transport.SSE).GetEndpoint().String(), ""
	}
	if c.GetSessionId() == "" {
		t.Fatal("no session id over streamable HTTP with protocol 2025-11-25")
	}
	return c, s.url(tr), c.GetSessionId()
}

// sessionRequest sends one request of an older protocol in a session
// (session: its Mcp-Session-Id; SSE carries it in the URL) with a token,
// and returns the HTTP status and the body (what came of it in 2 s for
// an event stream).
func sessionRequest(t *testing.T, method, url, token, session string, msg map[string]any) (int, string) {
	t.Helper()
	var body io.Reader
	if msg != nil {
		msg["jsonrpc"] = "2.0"
		raw, _ := json.Marshal(msg)
		body = strings.NewReader(string(raw))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body) // to its end, or the 2 s
	return resp.StatusCode, string(raw)
}

// TestLegacySessionsBoundToTokens: an MCP session of a protocol before
// 2026-07-28 (streamable HTTP's Mcp-Session-Id, SSE's sessionId) belongs
// to the token that opened it. Bob, holding alice's session id, is
// refused as for a session that never was, whatever he sends: his
// cancels for every small request id leave her running call alone (they
// cancelled it: mcp-go keys a session's requests in flight by its id),
// and on streamable HTTP he can neither listen on her session (GET) nor
// end it (DELETE). Alice's session goes on as before.
func TestLegacySessionsBoundToTokens(t *testing.T) {
	for _, tr := range []string{"http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			s, alice, bob := aliceAndBobOn(t, tr)
			ca, post, session := legacyClient(t, s, tr, alice)
			// A session id that no one was given, in the same form.
			neverPost, neverSession := post, otherDigits(session)
			if tr == "sse" {
				u, _ := url.Parse(post)
				q := u.Query()
				q.Set("sessionId", otherDigits(q.Get("sessionId")))
				u.RawQuery = q.Encode()
				neverPost = u.String()
			}

			done := make(chan contract.Result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := ca.CallTool(ctx, newCall(map[string]any{"language": "python", "code": "import time\ntime.sleep(5)\nprint('alice done')"}))
				if err != nil {
					done <- contract.Result{Stderr: "call: " + err.Error()}
					return
				}
				r, _ := decodeResult(res)
				done <- r
			}()
			time.Sleep(2 * time.Second) // her call is in flight

			cancelOf := func(id any) map[string]any {
				return map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": id, "reason": "e2e"}}
			}
			type answer struct {
				status int
				body   string
			}
			var bobs []answer
			for i := range 16 {
				for _, id := range []any{i, strconv.Itoa(i)} {
					status, body := sessionRequest(t, "POST", post, bob, session, cancelOf(id))
					bobs = append(bobs, answer{status, body})
				}
			}
			if r := <-done; r.Status != contract.StatusOK || r.Stdout != "alice done\n" {
				t.Errorf("alice's call after bob's cancels: %s %+v %q %q", r.Status, r.Error, r.Stdout, r.Stderr)
			}
			status, body := sessionRequest(t, "POST", neverPost, bob, neverSession, cancelOf(1))
			if status < 400 {
				t.Errorf("a cancel in a session that never was: HTTP %d %q", status, body)
			}
			for _, a := range bobs {
				if a != (answer{status, body}) {
					t.Fatalf("bob's cancel in alice's session: HTTP %d %q; in a session that never was: HTTP %d %q", a.status, a.body, status, body)
				}
			}

			// Nor a call, a listen or an end of her session.
			call := map[string]any{"id": 99, "method": "tools/call", "params": map[string]any{"name": "run_code",
				"arguments": map[string]any{"language": "python", "code": "print('bob was here')"}}}
			requests := []struct {
				method string
				msg    map[string]any
			}{{"POST", call}}
			if tr == "http" {
				requests = append(requests, struct {
					method string
					msg    map[string]any
				}{"GET", nil}, struct {
					method string
					msg    map[string]any
				}{"DELETE", nil})
			}
			for _, rq := range requests {
				status, answer := sessionRequest(t, rq.method, neverPost, bob, neverSession, rq.msg)
				got, gotAnswer := sessionRequest(t, rq.method, post, bob, session, rq.msg)
				if got != status || gotAnswer != answer || status < 400 {
					t.Errorf("bob's %s in alice's session: HTTP %d %.200q; in a session that never was: HTTP %d %.200q", rq.method, got, gotAnswer, status, answer)
				}
			}
			if r := callOn(t, ca, map[string]any{"language": "python", "code": "print('alice again')"}); r.Stdout != "alice again\n" {
				t.Fatalf("alice's session after bob's tries: %s %+v %q", r.Status, r.Error, r.Stdout)
			}
		})
	}
}

// otherDigits is id with each digit replaced by the next one.
func otherDigits(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '0' + (r-'0'+1)%10
		}
		return r
	}, id)
}
