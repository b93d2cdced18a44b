package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
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

// A runner without sessions answers a session_id with a typed error, not
// a one-off run.
func TestSessionIDWithoutSessions(t *testing.T) {
	m := manifest.Default()
	res := Deps{Manifest: m, Runner: noRunner{}}.Run(context.Background(), DecodeCall([]byte(`{"language":"python","code":"print(1)","session_id":"s_x"}`)))
	if res.Error == nil || res.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("%+v", res.Error)
	}
}

type noRunner struct{}

func (noRunner) Run(context.Context, sandbox.RunRequest) contract.Result {
	panic("a session call ran as a one-off run")
}
func (noRunner) Sessions() sandbox.SessionRunner                   { return nil }
func (noRunner) Peek(context.Context, string) (sandbox.Peek, bool) { return sandbox.Peek{}, false }
func (noRunner) Close() error                                      { return nil }

// The audit log names a session by its key, never by its id (a
// capability), even in the stored arguments.
func TestAuditKeepsNoSessionID(t *testing.T) {
	m := manifest.Default()
	m.Audit.StoreCode = true
	id := "s_secretsecretsecretsecretsecretsecr"
	raw := []byte(`{"language":"python","code":"print(1)","session_id":"` + id + `"}`)
	call := DecodeCall(raw)
	call.Client = "alice"
	res := contract.Result{RunID: "r_1", Language: "python", Status: contract.StatusOK, Session: &contract.SessionRef{ID: id, Call: 3, State: contract.SessionAlive}}
	e := AuditEntry(m, "http", call, res)
	line, _ := json.Marshal(e)
	if strings.Contains(string(line), id) {
		t.Fatalf("the audit line holds the session id: %s", line)
	}
	if e.Session == nil || e.Session.Call != 3 || e.Session.Key == "" || e.Client.Principal != "alice" || !strings.Contains(string(e.Args), e.Session.Key) {
		t.Fatalf("entry %+v", e)
	}
}

func (noRunner) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (noRunner) MarkKept(string) {}
