//go:build e2e

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTypeScriptClient drives the server with the reference TypeScript SDK
// client (installed from npm by `make e2e`).
func TestTypeScriptClient(t *testing.T) {
	cmd := exec.Command("node", "smoke.mjs", "stdio", runboxBin)
	cmd.Dir = "ts"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts smoke (") {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// TestTypeScriptClientSessions drives sessions with the reference
// TypeScript SDK client, which validates every structured result against
// the tools' output schemas.
func TestTypeScriptClientSessions(t *testing.T) {
	cmd := exec.Command("node", "session.mjs", runboxBin)
	cmd.Dir = "ts"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts session:") {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
