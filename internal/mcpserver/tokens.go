package mcpserver

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/runbox-mcp/runbox/tools"
)

// tokenSet is every accepted token by name; nil when none is required.
func (cfg HTTPConfig) tokenSet() map[string]string {
	if cfg.Token == "" && len(cfg.Tokens) == 0 {
		return nil
	}
	set := map[string]string{}
	for name, v := range cfg.Tokens {
		set[name] = v
	}
	if cfg.Token != "" {
		name := tools.LocalPrincipal
		if len(cfg.Tokens) > 0 {
			name = "default"
		}
		set[name] = cfg.Token
	}
	return set
}

// bearerNamed answers 401 unless the request carries one of the tokens,
// and marks the request with that token's name: the caller's principal,
// and its connection authenticated. Every token is compared, in constant
// time, whichever matches. A refused request's body is never read (f
// closes its connection).
func bearerNamed(tokens map[string]string, f *refusals, next http.Handler) http.Handler {
	if tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		who := ""
		for name, v := range tokens {
			if subtle.ConstantTimeCompare(got, []byte("Bearer "+v)) == 1 {
				who = name
			}
		}
		if who == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runbox"`)
			f.refuse(w, r, http.StatusUnauthorized, refusedUnauthorized, "missing or wrong bearer token")
			return
		}
		authenticated(r.Context())
		next.ServeHTTP(w, r.WithContext(tools.WithPrincipal(r.Context(), who)))
	})
}

// principalFromRequest carries the token's name into the tool call.
func principalFromRequest(ctx context.Context, r *http.Request) context.Context {
	return tools.WithPrincipal(ctx, tools.PrincipalOf(r.Context()))
}
