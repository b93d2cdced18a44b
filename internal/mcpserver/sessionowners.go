package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/tools"
)

// sessionOwners ties each MCP session of a protocol before 2026-07-28
// (streamable HTTP's Mcp-Session-Id, SSE's sessionId) to the bearer
// token's name that opened it. mcp-go keys such a session's state by its
// id alone (its requests in flight, so its cancels; its listening
// stream; its answers to the server's requests; its budget), so a token
// holder who learned another's id could act in that session. Here the id
// says its owner: a random part and a MAC of it with the owner's name,
// under a key of this process. A request whose session id was not made
// for its caller is refused as an id never made is, and no table of
// sessions needs keeping or bounding. A restarted server knows none of
// the ids it made before: their clients start a new session, as the
// protocol says they do on a 404.
type sessionOwners struct{ key []byte }

// sessionIDPrefix starts every session id, as mcp-go's own.
const sessionIDPrefix = "mcp-session-"

// errNotYourSession is a session id not made for its caller.
var errNotYourSession = errors.New("invalid session ID")

func newSessionOwners() *sessionOwners {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &sessionOwners{key: key}
}

// id makes a session id for caller.
func (o *sessionOwners) id(caller string) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	r := hex.EncodeToString(nonce)
	return sessionIDPrefix + r + "-" + o.mac(caller, r)
}

// owns reports whether id was made for caller.
func (o *sessionOwners) owns(caller, id string) bool {
	rest, ok := strings.CutPrefix(id, sessionIDPrefix)
	r, mac, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(o.mac(caller, r)))
}

func (o *sessionOwners) mac(caller, r string) string {
	h := hmac.New(sha256.New, o.key)
	h.Write([]byte(caller))
	h.Write([]byte{0})
	h.Write([]byte(r))
	return hex.EncodeToString(h.Sum(nil))
}

// http refuses, on the streamable HTTP endpoint, a request whose
// Mcp-Session-Id was not made for its caller, whatever its method: 404,
// as mcp-go answers an id it does not know (its GET, which would open a
// listening stream on any id, validates none).
func (o *sessionOwners) http(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(server.HeaderKeySessionID); id != "" && !o.owns(tools.PrincipalOf(r.Context()), id) {
			http.Error(w, "Invalid session ID", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sse passes on, on the SSE message endpoint, a message whose sessionId
// was not made for its caller with an id no session has: refused exactly
// as mcp-go refuses an id it does not know (the SSE server takes a
// session's id from its generator, sseID, and checks only that the
// session exists).
func (o *sessionOwners) sse(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if id := q.Get("sessionId"); id != "" && !o.owns(tools.PrincipalOf(r.Context()), id) {
			q.Set("sessionId", noSession)
			r = r.Clone(r.Context())
			r.URL.RawQuery = q.Encode()
		}
		next.ServeHTTP(w, r)
	})
}

// noSession is a session id that no session has (each is sessionIDPrefix,
// then hex).
const noSession = sessionIDPrefix + "none"

// sseID is the SSE server's session id generator: an id for the caller
// of the stream's request.
func (o *sessionOwners) sseID(_ context.Context, r *http.Request) (string, error) {
	return o.id(tools.PrincipalOf(r.Context())), nil
}

// ResolveSessionIdManager gives mcp-go, on streamable HTTP, the session
// ids of the request's caller: those it makes (initialize, a GET without
// one) are the caller's, and it takes no other (a POST, a DELETE). Without
// a request (the server ending sessions itself: shutdown, its sweeper)
// every session may be ended.
func (o *sessionOwners) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil {
		return callerSessionIDs{o: o, server: true}
	}
	return callerSessionIDs{o: o, caller: tools.PrincipalOf(r.Context())}
}

// callerSessionIDs are the session ids of one caller, or of the server.
type callerSessionIDs struct {
	o      *sessionOwners
	caller string
	server bool
}

func (c callerSessionIDs) Generate() string { return c.o.id(c.caller) }

func (c callerSessionIDs) Validate(id string) (isTerminated bool, err error) {
	if c.server || !c.o.owns(c.caller, id) {
		return false, errNotYourSession
	}
	return false, nil
}

func (c callerSessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	if c.server {
		return false, nil
	}
	_, err = c.Validate(id)
	return false, err
}
