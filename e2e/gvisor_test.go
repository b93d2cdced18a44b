//go:build e2e

package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// TestGVisorLevel runs the error kinds under isolation: gvisor (runsc): the
// same classification as runc, with the limits runsc cannot take enforced
// another way (RLIMIT_NPROC for the pids limit). What differs is said in
// docs/security.md: tmpfs inode caps are ignored, the call of a
// forbidden_syscall is not named, and an OOM ends the sandbox (no metrics).
func TestGVisorLevel(t *testing.T) {
	s := startServer(t, nil, "--manifest", writeManifest(t, "isolation: gvisor\n"))
	defer s.close()
	cases := []struct {
		name, lang, code string
		timeout          int
		kind             contract.Kind
		limit            contract.Limit
		stdout           string
	}{
		{"ok/python", "python", "import numpy\nprint(numpy.arange(4).sum())", 30, "", "", "6\n"},
		{"ok/javascript", "javascript", "console.log([1, 2, 3].map(x => x * 2).join(','))", 30, "", "", "2,4,6\n"},
		{"ok/bash", "bash", "echo $(( 6 * 7 ))", 30, "", "", "42\n"},
		{"no-network", "python", "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 443), timeout=3); print('ESCAPED')\nexcept OSError:\n    print('refused')\n", 30, "", "", "refused\n"},
		{"syntax", "python", "print(1", 30, contract.KindSyntax, "", ""},
		{"runtime", "javascript", "null.x", 30, contract.KindRuntime, "", ""},
		{"forbidden_syscall", "python", pySyscall(101), 30, contract.KindForbiddenSyscall, "", ""},
		{"forbidden_syscall/bash", "bash", "unshare -U true", 30, contract.KindForbiddenSyscall, "", ""},
		{"timeout", "python", "while True: pass", 2, contract.KindTimeout, contract.LimitWallTime, ""},
		{"oom", "python", "b = []\nwhile True:\n    b.append(bytearray(32 << 20))\n", 60, contract.KindOOM, contract.LimitMemory, ""},
		{"pids", "python", "import os, time\nfor i in range(400):\n    if os.fork() == 0:\n        time.sleep(5); os._exit(0)\n", 60, contract.KindResourceLimit, contract.LimitPids, ""},
		{"disk", "bash", "head -c 200000000 /dev/zero > /workspace/fill", 60, contract.KindResourceLimit, contract.LimitDisk, ""},
		{"output", "bash", "head -c 3000000 /dev/zero | tr '\\0' x", 30, contract.KindOutputLimit, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := s.call(t, map[string]any{"language": c.lang, "code": c.code, "timeout_seconds": c.timeout})
			if r.Isolation != "gvisor" {
				t.Errorf("isolation %q", r.Isolation)
			}
			if c.kind == "" {
				mustOK(t, r)
				if r.Stdout != c.stdout {
					t.Fatalf("stdout %q, want %q", r.Stdout, c.stdout)
				}
				return
			}
			wantError(t, r, c.kind, c.limit)
			if strings.Contains(r.Stdout, "ESCAPED") {
				t.Fatalf("escaped: %s", r.Stdout)
			}
		})
	}
}

// gvisorServer starts a server at isolation: gvisor on the Docker engine.
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
