package manifest

import (
	"fmt"
	"os"
	"regexp"
)

// Token is a named bearer token of the HTTP transports.
type Token struct {
	Name string `json:"name" jsonschema_description:"Who the token is (a person or an agent), in logs, the audit log and session ownership."`
	// Env names the environment variable holding the token, so no secret
	// is written in the manifest.
	Env string `json:"env" jsonschema_description:"The environment variable that holds the token's value (at least 16 characters)."`
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func (h HTTP) validateTokens(bad func(field string, value any, allowed string)) {
	seen := map[string]bool{}
	for i, t := range h.Tokens {
		f := fmt.Sprintf("http.tokens[%d]", i)
		if !mountNameRe.MatchString(t.Name) || seen[t.Name] {
			bad(f+".name", t.Name, "a unique name of lower-case letters, digits, _ and -, at most 32")
		}
		seen[t.Name] = true
		if !envNameRe.MatchString(t.Env) {
			bad(f+".env", t.Env, "an environment variable name")
		}
	}
}

// TokenValues reads the named tokens from the environment: name → value.
// A token whose variable is unset or shorter than 16 characters is an
// error, never a token that anyone could guess.
func (h HTTP) TokenValues() (map[string]string, error) {
	out := map[string]string{}
	for _, t := range h.Tokens {
		v := os.Getenv(t.Env)
		if len(v) < 16 {
			return nil, fmt.Errorf("http.tokens %s: $%s must hold a token of at least 16 characters", t.Name, t.Env)
		}
		out[t.Name] = v
	}
	return out, nil
}
