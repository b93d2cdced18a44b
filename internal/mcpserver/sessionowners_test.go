package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/tools"
)

// A session id is its caller's only: another caller's, a tampered one, one
// of another process and one that never was are all refused alike; the
// server itself may end any.
func TestSessionIDsBelongToTheirCaller(t *testing.T) {
	o, other := newSessionOwners(), newSessionOwners()
	id := o.id("alice")
	if !strings.HasPrefix(id, sessionIDPrefix) || !o.owns("alice", id) {
		t.Fatalf("alice's own id %q refused", id)
	}
	tampered := id[:len(id)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", id[len(id)-1])+1)%16])
	for _, tc := range []struct{ caller, id string }{
		{"bob", id}, {"alice", tampered}, {"alice", other.id("alice")}, {"alice", sessionIDPrefix + "00-00"},
		{"alice", noSession}, {"alice", ""}, {"alice", strings.TrimPrefix(id, sessionIDPrefix)},
	} {
		if o.owns(tc.caller, tc.id) {
			t.Errorf("%s owns %q", tc.caller, tc.id)
		}
	}
	req := func(who string) *http.Request {
		return httptest.NewRequest("POST", "/mcp", nil).WithContext(tools.WithPrincipal(context.Background(), who))
	}
	alice, bob := o.ResolveSessionIdManager(req("alice")), o.ResolveSessionIdManager(req("bob"))
	minted := alice.Generate()
	if _, err := alice.Validate(minted); err != nil {
		t.Fatalf("alice's session: %v", err)
	}
	if _, err := bob.Validate(minted); err == nil {
		t.Fatal("bob validated alice's session")
	}
	if _, err := bob.Terminate(minted); err == nil {
		t.Fatal("bob ended alice's session")
	}
	if _, err := o.ResolveSessionIdManager(nil).Terminate(minted); err != nil {
		t.Fatalf("the server ending a session: %v", err)
	}
	var _ server.SessionIdManagerResolver = o
}

// The HTTP layers refuse another caller's session id on every method, as
// an unknown one: 404 on streamable HTTP, and on SSE the message goes on
// with an id no session has.
func TestSessionLayersRefuseOthersIDs(t *testing.T) {
	o := newSessionOwners()
	id := o.id("alice")
	var reached []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.Query().Get("sessionId"))
	})
	for _, method := range []string{"POST", "GET", "DELETE"} {
		for who, want := range map[string]int{"alice": http.StatusOK, "bob": http.StatusNotFound} {
			r := httptest.NewRequest(method, "/mcp", nil).WithContext(tools.WithPrincipal(context.Background(), who))
			r.Header.Set(server.HeaderKeySessionID, id)
			w := httptest.NewRecorder()
			o.http(next).ServeHTTP(w, r)
			if w.Code != want {
				t.Errorf("%s's %s with alice's session: %d, want %d", who, method, w.Code, want)
			}
		}
	}
	reached = nil
	for _, who := range []string{"alice", "bob"} {
		r := httptest.NewRequest("POST", "/message?sessionId="+id, nil).WithContext(tools.WithPrincipal(context.Background(), who))
		o.sse(next).ServeHTTP(httptest.NewRecorder(), r)
	}
	if len(reached) != 2 || reached[0] != "POST "+id || reached[1] != "POST "+noSession {
		t.Fatalf("SSE messages went on as %q", reached)
	}
}
