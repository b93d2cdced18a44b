package doctor

import (
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// The workspaces line: absent when they are off; on Kubernetes the claims'
// storage class (no host command, no root); elsewhere a failure naming
// the fix without the host commands and without root.
func TestWorkspaceCheck(t *testing.T) {
	m := manifest.Default()
	if _, ok := workspaceCheck(m, 0); ok {
		t.Fatal("a line for workspaces that are off")
	}
	m.Workspaces.Enabled = true
	m.Backend = manifest.BackendKubernetes
	t.Setenv("PATH", t.TempDir())
	if c, _ := workspaceCheck(m, 1000); c.Status != OK || !strings.Contains(c.Detail, "default storage class") {
		t.Fatalf("kubernetes: %+v", c)
	}
	m.Kubernetes.WorkspaceStorageClass = "fast"
	if c, _ := workspaceCheck(m, 1000); c.Status != OK || !strings.Contains(c.Detail, "storage class fast") {
		t.Fatalf("kubernetes, a class: %+v", c)
	}
	t.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
	m.Backend = manifest.BackendDocker
	if c, _ := workspaceCheck(m, 1000); c.Status != Fail || !strings.Contains(c.Detail, "root") && !strings.Contains(c.Detail, "missing") {
		t.Fatalf("not root: %+v", c)
	}
	t.Setenv("PATH", t.TempDir())
	if c, _ := workspaceCheck(m, 0); c.Status != Fail || !strings.Contains(c.Detail, "mkfs.ext4") || c.Fix == "" {
		t.Fatalf("no mkfs.ext4: %+v", c)
	}
}
