package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/expose"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestValidateOpen(t *testing.T) {
	m := manifest.Default()
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		args SessionOpenArgs
		ok   bool
	}{
		{"plain", SessionOpenArgs{Language: "python"}, true},
		{"unknown language", SessionOpenArgs{Language: "cobol"}, false},
		{"shorter ttl", SessionOpenArgs{Language: "bash", IdleTTLSeconds: f(5)}, true},
		{"ttl past the server's", SessionOpenArgs{Language: "bash", IdleTTLSeconds: f(1e6)}, false},
		{"less memory", SessionOpenArgs{Language: "python", MemoryMiB: i(128)}, true},
		{"more memory than allowed", SessionOpenArgs{Language: "python", MemoryMiB: i(1 << 20)}, false},
		{"too few pids", SessionOpenArgs{Language: "python", Pids: i(1)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, bad := validateOpen(m, c.args)
			if (bad == nil) != c.ok {
				t.Fatalf("%+v", bad)
			}
			if bad != nil && bad.Kind != contract.KindInvalidRequest {
				t.Fatalf("kind %s", bad.Kind)
			}
			if c.args.MemoryMiB != nil && bad == nil && int64(req.Limits.Memory) != *c.args.MemoryMiB<<20 {
				t.Fatalf("memory %d", req.Limits.Memory)
			}
		})
	}
}

func TestPrincipal(t *testing.T) {
	if p := PrincipalOf(context.Background()); p != LocalPrincipal {
		t.Fatal(p)
	}
	if p := PrincipalOf(WithPrincipal(context.Background(), "alice")); p != "alice" {
		t.Fatal(p)
	}
}

// boxes stands for the sessions' boxes: alice's s_1 and s_2.
type boxes struct{ done chan struct{} }

func (b boxes) DialSession(context.Context, string, string, int) (net.Conn, error) {
	return nil, errors.New("not dialled here")
}

func (b boxes) SessionDone(_ context.Context, id, client string) (<-chan struct{}, bool) {
	return b.done, client == "alice" && (id == "s_1" || id == "s_2")
}

// session_list names each session's open exposures, the caller's only,
// in its structure and its text, and says nothing of them when there are
// none.
func TestSessionListNamesExposures(t *testing.T) {
	cfg := manifest.DefaultExpose()
	cfg.Enabled = true
	b := boxes{done: make(chan struct{})}
	set := expose.New(cfg, b, nil, nil)
	t.Cleanup(set.CloseAll)
	x, err := set.Expose(context.Background(), "s_1", "alice", 8000, "dashboard")
	if err != nil {
		t.Fatal(err)
	}
	list := func(client string, set *expose.Set) SessionResult {
		got := withExposures([]contract.SessionInfo{{ID: "s_1", Language: "python"}, {ID: "s_2", Language: "python"}}, set, client)
		return SessionResult{Sessions: got}
	}
	res := list("alice", set)
	want := []contract.SessionExposure{{ID: x.ID, Name: "dashboard", BoxPort: 8000, URL: x.URL}}
	if !reflect.DeepEqual(res.Sessions[0].Exposures, want) || res.Sessions[1].Exposures != nil {
		t.Fatalf("alice's sessions: %+v", res.Sessions)
	}
	text := sessionAnswer(res).Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, "box port 8000 \"dashboard\" open to the person at "+x.URL+" (exposure "+x.ID+")") {
		t.Fatalf("text: %s", text)
	}
	if strings.Count(text, "open to the person") != 1 {
		t.Fatalf("s_2 has none: %s", text)
	}
	// Another client's view of the same ids names none of alice's.
	if res := list("bob", set); res.Sessions[0].Exposures != nil {
		t.Fatalf("bob sees %+v", res.Sessions[0].Exposures)
	}
	// None open, or none on the server: the answer is as it was.
	plain := sessionAnswer(list("alice", nil))
	raw, _ := json.Marshal(plain.StructuredContent)
	if strings.Contains(string(raw), "exposures") || strings.Contains(plain.Content[0].(mcp.TextContent).Text, "open to the person") {
		t.Fatalf("without exposures: %s", raw)
	}
	if err := set.Close("alice", x.ID); err != nil {
		t.Fatal(err)
	}
	if res := list("alice", set); res.Sessions[0].Exposures != nil {
		t.Fatalf("a closed exposure is still named: %+v", res.Sessions[0].Exposures)
	}
}
