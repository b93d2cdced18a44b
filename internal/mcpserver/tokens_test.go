package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/runbox-mcp/runbox/tools"
)

func TestNamedTokensMarkThePrincipal(t *testing.T) {
	cfg := HTTPConfig{Token: "single-token-0123456789", Tokens: map[string]string{"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}}
	var who string
	h := bearerNamed(cfg.tokenSet(), newRefusals(nil, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who = tools.PrincipalOf(r.Context())
	}))
	for token, want := range map[string]string{"alice-token-0123456789": "alice", "bob-token-0123456789": "bob", "single-token-0123456789": "default"} {
		who = ""
		req := httptest.NewRequest("POST", "/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || who != want {
			t.Errorf("%s: %d as %q", want, rec.Code, who)
		}
	}
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", rec.Code)
	}
	if set := (HTTPConfig{Token: "only"}).tokenSet(); set[tools.LocalPrincipal] != "only" {
		t.Fatalf("a single token is the local principal: %v", set)
	}
}
