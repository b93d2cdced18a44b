package doctor

import (
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// The workspaces line: absent when they are off, a failure naming the fix
// on Kubernetes, without the host commands and without root.
func TestWorkspaceCheck(t *testing.T) {
	m := manifest.Default()
	if _, ok := workspaceCheck(m, 0); ok {
		t.Fatal("a line for workspaces that are off")
	}
	m.Workspaces.Enabled = true
	m.Backend = manifest.BackendKubernetes
	if c, _ := workspaceCheck(m, 0); c.Status != Fail || !strings.Contains(c.Detail, "kubernetes") {
		t.Fatalf("kubernetes: %+v", c)
	}
	m.Backend = manifest.BackendDocker
	if c, _ := workspaceCheck(m, 1000); c.Status != Fail || !strings.Contains(c.Detail, "root") && !strings.Contains(c.Detail, "missing") {
		t.Fatalf("not root: %+v", c)
	}
	t.Setenv("PATH", t.TempDir())
	if c, _ := workspaceCheck(m, 0); c.Status != Fail || !strings.Contains(c.Detail, "mkfs.ext4") || c.Fix == "" {
		t.Fatalf("no mkfs.ext4: %+v", c)
	}
}
