//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// Over HTTP a session belongs to the bearer token that opened it: with
// another declared token its id is session_not_found, and it is not
// listed.
func TestSessionsBoundToTokens(t *testing.T) {
	s, alice, bob := aliceAndBob(t)
	ca, cb := tokenClient(t, s, alice), tokenClient(t, s, bob)

	open := toolOn(t, ca, "session_open", map[string]any{"language": "python"})
	id := open.Session.ID
	if r := callOn(t, ca, map[string]any{"language": "python", "code": "x = 'alice data'", "session_id": id}); r.Status != contract.StatusOK {
		t.Fatalf("alice: %+v", r.Error)
	}
	r := callOn(t, cb, map[string]any{"language": "python", "code": "print(x)", "session_id": id})
	if r.Error == nil || r.Error.Kind != contract.KindSessionNotFound {
		t.Fatalf("bob used alice's session: %+v %q", r.Error, r.Stdout)
	}
	if l := toolOn(t, cb, "session_list", map[string]any{}); len(l.Sessions) != 0 {
		t.Fatalf("bob sees %+v", l.Sessions)
	}
	if c := toolOn(t, cb, "session_close", map[string]any{"session_id": id}); c.Error == nil || c.Error.Kind != contract.KindSessionNotFound {
		t.Fatalf("bob closed alice's session: %+v", c)
	}
	// Nothing was lost by bob's tries.
	if r := callOn(t, ca, map[string]any{"language": "python", "code": "print(x)", "session_id": id}); r.Stdout != "alice data\n" {
		t.Fatalf("alice after bob: %+v %q", r.Error, r.Stdout)
	}
	toolOn(t, ca, "session_close", map[string]any{"session_id": id})
}

// aliceAndBob starts a streamable HTTP server with two named tokens,
// alice's and bob's, and returns it with their values.
func aliceAndBob(t *testing.T) (s *netServer, alice, bob string) {
	t.Helper()
	return aliceAndBobOn(t, "http")
}

// aliceAndBobOn is aliceAndBob on a transport: http or sse.
func aliceAndBobOn(t *testing.T, transport string) (s *netServer, alice, bob string) {
	t.Helper()
	alice, bob = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
	t.Setenv("RBX_E2E_ALICE", alice)
	t.Setenv("RBX_E2E_BOB", bob)
	m := writeManifest(t, "audit:\n  enabled: false\nhttp:\n  tokens:\n    - {name: alice, env: RBX_E2E_ALICE}\n    - {name: bob, env: RBX_E2E_BOB}\n")
	return startNetServer(t, transport, "--manifest", m), alice, bob
}

func tokenClient(t *testing.T, s *netServer, token string) *client.Client {
	t.Helper()
	return s.clientAs(t, "http", token, mcp.LATEST_PROTOCOL_VERSION)
}

func toolOn(t *testing.T, c *client.Client, name string, args map[string]any) sessionAnswer {
	t.Helper()
	return structuredCall[sessionAnswer](t, c, time.Minute, false, name, args)
}

// TestRunResourcesBoundToTokens: a run's output and artifacts, read as
// resources, are its caller's. With another declared token the run's
// stdout and files answer exactly as a run id that never was (no
// oracle of what exists), as run_wait does; its owner reads them.
func TestRunResourcesBoundToTokens(t *testing.T) {
	s, alice, bob := aliceAndBob(t)
	ca, cb := tokenClient(t, s, alice), tokenClient(t, s, bob)

	r := callOn(t, ca, map[string]any{"language": "python", "code": "open('secret.txt', 'w').write('alice files')\nfor i in range(3000): print('alice output', i)"})
	if r.Status != contract.StatusOK || r.StdoutCut == nil || r.StdoutCut.URI == "" || len(r.Artifacts) != 1 {
		t.Fatalf("alice's run: %s %+v cut %+v artifacts %+v", r.Status, r.Error, r.StdoutCut, r.Artifacts)
	}
	read := func(c *client.Client, uri string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := c.ReadResource(ctx, req)
		if err != nil {
			return "", err
		}
		raw, _ := json.Marshal(res.Contents)
		return string(raw), nil
	}
	const never = "r_01KB0000000000000000000000"
	for _, uri := range []string{r.StdoutCut.URI, r.Artifacts[0].URI} {
		if got, err := read(ca, uri); err != nil || !strings.Contains(got, "alice") {
			t.Fatalf("alice reads %s: %v %.80s", uri, err, got)
		}
		got, err := read(cb, uri)
		if err == nil {
			t.Errorf("bob read alice's %s: %.200s", uri, got)
			continue
		}
		_, unknown := read(cb, strings.Replace(uri, r.RunID, never, 1))
		if unknown == nil || strings.ReplaceAll(err.Error(), r.RunID, never) != unknown.Error() {
			t.Errorf("bob's read of alice's %s answers %q, an unknown run's %q", uri, err, unknown)
		}
	}
	if w := toolOn(t, cb, "run_wait", map[string]any{"run_id": r.RunID}); w.Error == nil || w.Error.Kind != contract.KindInvalidRequest {
		t.Errorf("bob's run_wait of alice's run: %+v", w)
	}
}
