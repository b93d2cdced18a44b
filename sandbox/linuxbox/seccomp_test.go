package linuxbox

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// TestSeccompProfiles: each isolation level has its own profile, compact
// JSON, runc's killing the calls it forbids, and no other level has one.
func TestSeccompProfiles(t *testing.T) {
	runc, gvisor := Seccomp(manifest.IsolationRunc), Seccomp(manifest.IsolationGVisor)
	for level, p := range map[string]string{"runc": runc, "gvisor": gvisor} {
		var v struct{ DefaultAction string }
		if err := json.Unmarshal([]byte(p), &v); err != nil || v.DefaultAction == "" {
			t.Errorf("%s: not a profile (%v): %.80s", level, err, p)
		}
		if strings.ContainsAny(p, "\n\t") {
			t.Errorf("%s: not compact", level)
		}
	}
	if !strings.Contains(runc, `"SCMP_ACT_KILL_PROCESS"`) {
		t.Error("runc's profile kills nothing")
	}
	if runc == gvisor {
		t.Error("gvisor's profile is runc's")
	}
	if Seccomp("none") != "" {
		t.Error("a profile for an unknown level")
	}
}

func TestMustSeccompRefusesAMissingProfile(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for an architecture without a profile")
		}
	}()
	mustSeccomp("vax.json")
}
