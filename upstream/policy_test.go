package upstream

import (
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// A glob applies under every spelling a call can arrive by: the server's
// own name and the identifier code calls it by.
func TestPolicySpellings(t *testing.T) {
	for _, c := range []struct {
		name             string
		allow, deny, ask []string
		tool, want       string
	}{
		{"deny by identifier", nil, []string{"get_env"}, nil, "get-env", manifest.PolicyDeny},
		{"deny by own name", nil, []string{"get-env"}, nil, "get-env", manifest.PolicyDeny},
		{"deny glob by identifier", nil, []string{"get_*"}, nil, "get-env", manifest.PolicyDeny},
		{"ask by identifier", nil, nil, []string{"get_env"}, "get-env", manifest.PolicyAsk},
		{"allow by identifier", []string{"get_env"}, nil, nil, "get-env", manifest.PolicyAllow},
		{"allow list misses", []string{"echo"}, nil, nil, "get-env", manifest.PolicyDeny},
		{"deny before allow", []string{"get-env"}, []string{"get_env"}, nil, "get-env", manifest.PolicyDeny},
		{"other tool", nil, []string{"get_env"}, nil, "echo", manifest.PolicyAllow},
		{"dotted", nil, []string{"a_b_c"}, nil, "a.b-c", manifest.PolicyDeny},
	} {
		s := manifest.Server{Allow: c.allow, Deny: c.deny, Ask: c.ask}
		if got := policy(s, c.tool); got != c.want {
			t.Errorf("%s: policy(%q) = %s, want %s", c.name, c.tool, got, c.want)
		}
	}
}
