package runs

import (
	"strings"
	"testing"

	"encoding/json"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// Every connection of a run is in its audit line, reasons redacted.
func TestAuditEntryNetwork(t *testing.T) {
	res := contract.Result{RunID: "r_1", Language: "python", Status: contract.StatusOK, Network: []contract.Connection{
		{Host: "api.example", Port: 443, Method: "CONNECT", Allowed: true, Rule: "network.allow[0] (api.example:443)", BytesOut: 10, BytesIn: 20},
		{Host: "evil.example", Port: 80, Method: "GET", Reason: "not declared; token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
	}}
	e := AuditEntry(manifest.Default(), "stdio", Call{}, res)
	if len(e.Network) != 2 || e.Network[0].Rule != res.Network[0].Rule || e.Network[1].Allowed || e.Network[0].BytesIn != 20 {
		t.Fatalf("network: %+v", e.Network)
	}
	if strings.Contains(e.Network[1].Reason, "ghp_abcdef") || e.Redacted == 0 {
		t.Fatalf("reason not redacted: %q", e.Network[1].Reason)
	}
}

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
