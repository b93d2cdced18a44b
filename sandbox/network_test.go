package sandbox

import (
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

func TestWithNetwork(t *testing.T) {
	denied := contract.Connection{Host: "evil.example", Port: 443, Method: "CONNECT", Reason: "evil.example:443 is not declared in the manifest's network.allow"}
	allowed := contract.Connection{Host: "api.example", Port: 443, Method: "CONNECT", Allowed: true, Rule: "network.allow[0] (api.example:443)"}
	runtime := func() contract.Result {
		return contract.Result{Status: contract.StatusError, Error: &contract.ErrorInfo{Kind: contract.KindRuntime, Type: "URLError", Line: 3, Message: "Tunnel connection failed: 403"}}
	}
	cases := []struct {
		name string
		res  contract.Result
		recs []contract.Connection
		kind contract.Kind
		msg  string
	}{
		{"failed after a refusal", runtime(), []contract.Connection{allowed, denied, denied}, contract.KindForbiddenNetwork, "refused a connection to evil.example:443: evil.example:443 is not declared in the manifest's network.allow (2 connections were refused)"},
		{"failed, all allowed", runtime(), []contract.Connection{allowed}, contract.KindRuntime, "Tunnel"},
		{"ok after a refusal", contract.Result{Status: contract.StatusOK}, []contract.Connection{denied}, "", ""},
		{"timeout after a refusal", contract.Result{Status: contract.StatusError, Error: &contract.ErrorInfo{Kind: contract.KindTimeout}}, []contract.Connection{denied}, contract.KindTimeout, ""},
		{"no connections", runtime(), nil, contract.KindRuntime, "Tunnel"},
	}
	for _, tc := range cases {
		res := tc.res
		withNetwork(&res, tc.recs)
		if res.Network == nil || len(res.Network) != len(tc.recs) {
			t.Errorf("%s: network %v", tc.name, res.Network)
		}
		var kind contract.Kind
		msg := ""
		if res.Error != nil {
			kind, msg = res.Error.Kind, res.Error.Message
		}
		if kind != tc.kind || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %s %q, want %s %q", tc.name, kind, msg, tc.kind, tc.msg)
		}
		if kind == contract.KindForbiddenNetwork && (res.Error.Line != 3 || res.Error.Type != "URLError" || !strings.Contains(res.Error.Hint, "network.allow")) {
			t.Errorf("%s: %+v", tc.name, res.Error)
		}
	}
}
