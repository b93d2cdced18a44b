package sandbox

import (
	"os/exec"
	"strings"
	"testing"
)

// The import graph points down (doc.go): sandbox knows no engine client,
// no MCP, no driver, neither egress nor upstream, whose pieces a run gets
// from its caller; and upstream and egress, which serve a run's streams,
// know the channel's types (initproto), not the run algorithm.
func TestImportsPointDown(t *testing.T) {
	deps := func(pkgs ...string) []string {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", pkgs, err)
		}
		return strings.Fields(string(out))
	}
	const mod = "github.com/runbox-mcp/runbox/"
	for _, p := range deps(".") {
		for _, banned := range []string{mod + "egress", mod + "upstream", mod + "tools", mod + "sandbox/", "github.com/docker/", "k8s.io/", "github.com/mark3labs/mcp-go"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("sandbox imports %s", p)
			}
		}
	}
	for _, p := range deps("../upstream", "../egress") {
		if strings.HasPrefix(p, mod+"sandbox") {
			t.Errorf("upstream or egress imports %s", p)
		}
	}
}
