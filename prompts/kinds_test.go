package prompts

import (
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// TestAdviceForEveryKind: each of the contract's kinds has advice of its
// own, not the fallback.
func TestAdviceForEveryKind(t *testing.T) {
	m := manifest.Default()
	fallback := advice(m, "no_such_kind", "")
	for _, k := range contract.Kinds {
		if advice(m, k, "") == fallback {
			t.Errorf("no advice for %s", k)
		}
	}
}
