//go:build e2e

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// gvisorServer starts a server at isolation: gvisor (runsc) on the Docker
// engine, for TestContract. What differs from runc is in docs/security.md
// and, where a result shows it, in the contract table: the pids limit is
// RLIMIT_NPROC, tmpfs inode caps are ignored, a forbidden_syscall's call
// is not named, and an OOM ends the sandbox (no metrics).
func gvisorServer(t *testing.T, manifest string) *server {
	t.Helper()
	out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
	if err != nil {
		t.Fatalf("docker info: %v", err)
	}
	if !strings.Contains(string(out), `"runsc"`) {
		absent(t, "the Docker engine has no runsc runtime (`make setup` installs gVisor)")
	}
	return engineServer(t, "", "isolation: gvisor\n"+manifest)
}
