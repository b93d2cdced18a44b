//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestPodmanProfile checks, from inside a box on Podman's Docker-compatible
// API (`podman system service`), the profile items Podman takes in another
// form than Docker and that no contract case shows: masked paths, tmpfs
// options and owners, RLIMIT_NPROC. The contract, with seccomp and the
// writable places, is TestContract/podman. It runs when
// RUNBOX_PODMAN_HOST names the service, e.g.
//
//	RUNBOX_PODMAN_HOST=$(bash scripts/podman.sh | sed 's/^DOCKER_HOST=//') make e2e
//
// scripts/podman.sh installs and starts it and copies the sandbox image
// into it; docs/podman.md says what differs.
func TestPodmanProfile(t *testing.T) {
	s := podmanServer(t, "")
	r, _ := s.call(t, map[string]any{"language": "bash", "code": `
echo "nproc-ok $([ "$(ulimit -u)" != unlimited ] && echo yes)"
echo "interrupts $(cat /proc/interrupts 2>/dev/null | wc -c)"
echo "timer_list $(cat /proc/timer_list 2>/dev/null | wc -c)"
grep -E ' /(workspace|tmp) ' /proc/mounts | awk '{print $2, $4}'
stat -c 'owner %n %U %a' /workspace /tmp
true`})
	mustOK(t, r)
	for _, want := range []string{
		"nproc-ok yes", "interrupts 0", "timer_list 0", "owner /workspace sandbox 755", "owner /tmp sandbox 1777",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("want %q in:\n%s", want, r.Stdout)
		}
	}
	mounts := 0
	for _, line := range strings.Split(r.Stdout, "\n") {
		if strings.HasPrefix(line, "/workspace ") || strings.HasPrefix(line, "/tmp ") {
			mounts++
			for _, opt := range []string{"nosuid", "nodev", "noexec", "size=65536k"} {
				if !strings.Contains(line, opt) {
					t.Errorf("tmpfs %q lacks %s", line, opt)
				}
			}
		}
	}
	if mounts != 2 {
		t.Errorf("want /workspace and /tmp in /proc/mounts:\n%s", r.Stdout)
	}
}

// podmanServer starts a server on Podman's Docker-compatible API at
// RUNBOX_PODMAN_HOST.
func podmanServer(t *testing.T, manifest string) *server {
	t.Helper()
	host := os.Getenv("RUNBOX_PODMAN_HOST")
	if host == "" {
		absent(t, "RUNBOX_PODMAN_HOST is not set (bash scripts/podman.sh prints it)")
	}
	return engineServer(t, host, manifest)
}

// TestPodmanSessions runs the session suites on Podman: a session box is
// found by its labels and attached to again through the same
// Docker-compatible calls, and its state, errors and losses read as on
// Docker. OOM is said by runbox-init's own count of the box's OOM kills
// (Podman sets no OOMKilled on cgroup v1). The server's clean-up checks
// that no box is left on Podman.
func TestPodmanSessions(t *testing.T) {
	s := podmanServer(t, "limits:\n  memory: 256MiB\n")
	t.Run("state", func(t *testing.T) { sessionStatePersists(t, s) })
	t.Run("errors", func(t *testing.T) { sessionErrors(t, s) })
}

// TestPodmanRelayRefusesTheProgram: a Podman box listens on its relay
// socket (internal/initproto relay.go) from before the program starts.
// The program, under the manifest's non-root uid, can neither take the
// name nor be answered there: its connection is closed without a byte,
// while stdin is open and after.
func TestPodmanRelayRefusesTheProgram(t *testing.T) {
	s := podmanServer(t, "")
	r, _ := s.call(t, map[string]any{"language": "python", "code": takeSocket("runbox-init/channel")})
	mustOK(t, r)
	if r.Stdout != "bind EADDRINUSE\nanswered b''\n" {
		t.Errorf("the program reached the relay:\n%s", r.Stdout)
	}
}

// takeSocket is a Python program that tries to bind runbox-init's abstract
// socket name, then connects to it and prints what it is answered: a box
// whose runbox-init holds the name prints "bind EADDRINUSE" and, when the
// connection is closed unanswered, an empty answer.
func takeSocket(name string) string {
	return `
import socket, errno
name = "\0` + name + `"
b = socket.socket(socket.AF_UNIX)
try:
    b.bind(name)
    print("bound")
except OSError as e:
    print("bind", errno.errorcode[e.errno])
c = socket.socket(socket.AF_UNIX)
c.settimeout(20)
c.connect(name)
try:
    print("answered", c.recv(16))
except ConnectionResetError:
    print("answered", b"")
`
}
