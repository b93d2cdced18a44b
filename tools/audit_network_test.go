package tools

import (
	"strings"
	"testing"

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
