package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/tools"
)

// callerCancels serves notifications/cancelled of protocol 2026-07-28 on
// streamable HTTP, where requests carry no session: mcp-go keys its
// in-flight requests by session id, so every session-less request of
// every caller would share one key space, and any token could cancel
// another's call by its (small, guessable) request id. Here a modern
// request is in flight under its caller (the bearer token's name) and
// its id, and a cancel reaches only its own caller's request; no modern
// cancel goes on to mcp-go. Requests of earlier versions carry their
// session's id (random, the session's capability) and mcp-go serves
// their cancels.
type callerCancels struct {
	mu    sync.Mutex
	calls map[inflightKey]*inflightCall
}

type inflightKey struct{ caller, id string }

type inflightCall struct{ cancel context.CancelFunc }

func newCallerCancels() *callerCancels {
	return &callerCancels{calls: map[inflightKey]*inflightCall{}}
}

// envelope is what the layer reads of a message: nothing of a call's
// arguments, which the decoder skips without keeping.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
		Meta      struct {
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
}

// idKey is a JSON-RPC id as a key: its JSON, compact.
func idKey(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func (c *callerCancels) http(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := heldBytes(r)
		if r.Method != http.MethodPost || !ok {
			next.ServeHTTP(w, r)
			return
		}
		var m envelope
		// As mcp-go tells the eras apart: the header or the body may say
		// the version.
		if json.Unmarshal(body, &m) != nil ||
			!(mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) || mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		caller := tools.PrincipalOf(r.Context())
		if m.Method == string(mcp.MethodNotificationCancelled) && len(m.ID) == 0 {
			if len(m.Params.RequestID) > 0 {
				c.cancel(inflightKey{caller, idKey(m.Params.RequestID)})
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if len(m.ID) == 0 || m.Method == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		key := inflightKey{caller, idKey(m.ID)}
		call := &inflightCall{cancel: cancel}
		c.mu.Lock()
		c.calls[key] = call
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			if c.calls[key] == call {
				delete(c.calls, key)
			}
			c.mu.Unlock()
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// cancel cancels the request in flight under key, if any.
func (c *callerCancels) cancel(key inflightKey) {
	c.mu.Lock()
	call := c.calls[key]
	c.mu.Unlock()
	if call != nil {
		call.cancel()
	}
}
