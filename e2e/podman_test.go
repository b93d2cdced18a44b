//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/sandbox"
)

// TestPodman runs the server against Podman's Docker-compatible API
// (`podman system service`) and checks that calls answer as they do on
// Docker: each language, the limits, and the profile items Podman reads
// differently from Docker (seccomp, tmpfs, masked paths). It runs only when
// RUNBOX_PODMAN_HOST names the service, e.g.
//
//	RUNBOX_PODMAN_HOST=$(bash scripts/podman.sh | sed 's/^DOCKER_HOST=//') make e2e
//
// scripts/podman.sh installs and starts it and copies the sandbox image
// into it; docs/podman.md says what differs.
func TestPodman(t *testing.T) {
	host := os.Getenv("RUNBOX_PODMAN_HOST")
	if host == "" {
		absent(t, "RUNBOX_PODMAN_HOST is not set (bash scripts/podman.sh prints it)")
	}
	// Boxes on the Podman engine, through the docker CLI the harness
	// already needs.
	podmanBoxes := func() []string {
		out, err := exec.Command("docker", "-H", host, "ps", "-aq", "--filter", "label="+sandbox.LabelManaged+"=true").Output()
		if err != nil {
			t.Fatalf("listing boxes on %s: %v", host, err)
		}
		return strings.Fields(string(out))
	}
	if left := podmanBoxes(); len(left) > 0 {
		t.Fatalf("boxes already on %s before the test: %v", host, left)
	}

	s := startServer(t, []string{"DOCKER_HOST=" + host})
	closed := false
	defer func() {
		if !closed {
			s.close()
		}
	}()
	call := func(t *testing.T, lang, code string, extra ...any) contract.Result {
		t.Helper()
		args := map[string]any{"language": lang, "code": code}
		for i := 0; i+1 < len(extra); i += 2 {
			args[extra[i].(string)] = extra[i+1]
		}
		r, _ := s.call(t, args)
		return r
	}

	t.Run("languages", func(t *testing.T) {
		for _, c := range []struct{ lang, code string }{
			{"python", "import sys; print(sys.stdin.read().upper(), end='')"},
			{"javascript", "let d=''; process.stdin.on('data', c => d += c).on('end', () => process.stdout.write(d.toUpperCase()));"},
			{"bash", "tr a-z A-Z"},
		} {
			r := call(t, c.lang, c.code, "stdin", "hello podman\n")
			mustOK(t, r)
			if r.Stdout != "HELLO PODMAN\n" || r.ExitCode == nil || *r.ExitCode != 0 || r.Isolation != "runc" || r.Image == "" {
				t.Errorf("%s: %+v", c.lang, r)
			}
		}
	})

	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		r := call(t, "python", "while True: pass", "timeout_seconds", 2)
		wantError(t, r, contract.KindTimeout, contract.LimitWallTime)
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("a 2 s timeout took %v", d)
		}
	})

	t.Run("oom", func(t *testing.T) {
		// Podman 4.3 does not report OOMKilled on cgroup v1: this is the
		// box's own memory-cgroup counter at work.
		r := call(t, "python", "chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))\n")
		wantError(t, r, contract.KindOOM, contract.LimitMemory)
	})

	t.Run("no network", func(t *testing.T) {
		// The connect is tried only from a box with no interface but lo,
		// where it cannot leave the machine.
		r := call(t, "python", `
import os, socket
ifs = sorted(os.listdir("/sys/class/net"))
if ifs != ["lo"]:
    raise SystemExit("NETWORK %s" % ifs)
s = socket.socket(); s.settimeout(3)
s.connect(("1.1.1.1", 443))
print("CONNECTED")`)
		e := wantError(t, r, contract.KindRuntime, "")
		if strings.Contains(r.Stdout, "CONNECTED") || strings.Contains(r.Stderr, "NETWORK") || !strings.Contains(e.Message, "Network is unreachable") {
			t.Fatalf("the box has a network: %+v\nstdout: %s\nstderr: %s", e, r.Stdout, r.Stderr)
		}
	})

	t.Run("forbidden syscall", func(t *testing.T) {
		r := call(t, "python", "import ctypes\nprint('before', flush=True)\nctypes.CDLL(None).syscall(101, 0, 0, 0, 0)\nprint('after')\n")
		e := wantError(t, r, contract.KindForbiddenSyscall, "")
		if r.Stdout != "before\n" || (e.Syscall != "" && e.Syscall != "ptrace") {
			t.Fatalf("ptrace was not killed by runbox's profile: %+v stdout %q", e, r.Stdout)
		}
	})

	t.Run("pids", func(t *testing.T) {
		r := call(t, "python", "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30); os._exit(0)\n")
		wantError(t, r, contract.KindResourceLimit, contract.LimitPids)
	})

	t.Run("artifacts", func(t *testing.T) {
		r := call(t, "python", "import os\nos.makedirs('/workspace/out', exist_ok=True)\nopen('/workspace/out/result.txt', 'w').write('hello artifact\\n')\n")
		mustOK(t, r)
		const sum = "51bc0fc1f19104fa6e89ce50be9aa1f57c3346c1ca51ab49f5f00e14ce8f8076" // of "hello artifact\n"
		if len(r.Artifacts) != 1 || r.Artifacts[0].Path != "out/result.txt" || r.Artifacts[0].SizeBytes != 15 || r.Artifacts[0].SHA256 != sum {
			t.Fatalf("artifacts %+v", r.Artifacts)
		}
	})

	// The items Podman takes in another form than Docker, from inside a box.
	t.Run("profile", func(t *testing.T) {
		r := call(t, "bash", `
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '
echo "uid $(id -u) nproc-ok $([ "$(ulimit -u)" != unlimited ] && echo yes)"
echo "interrupts $(cat /proc/interrupts 2>/dev/null | wc -c)"
echo "timer_list $(cat /proc/timer_list 2>/dev/null | wc -c)"
grep -E ' /(workspace|tmp) ' /proc/mounts | awk '{print $2, $4}'
stat -c 'owner %n %U %a' /workspace /tmp
for p in /x /etc/x /usr/bin/x /.runbox/x /dev/shm/x /var/tmp/x /run/x; do touch $p 2>/dev/null && echo "WROTE $p"; done
touch /workspace/ok /tmp/ok && echo "scratch writable"
true`)
		mustOK(t, r)
		for _, want := range []string{
			"CapEff: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2", "uid 1000 nproc-ok yes",
			"interrupts 0", "timer_list 0", "owner /workspace sandbox 755", "owner /tmp sandbox 1777",
		} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("want %q in:\n%s", want, r.Stdout)
			}
		}
		for _, line := range strings.Split(r.Stdout, "\n") {
			if strings.HasPrefix(line, "/workspace ") || strings.HasPrefix(line, "/tmp ") {
				for _, opt := range []string{"nosuid", "nodev", "noexec", "size=65536k"} {
					if !strings.Contains(line, opt) {
						t.Errorf("tmpfs %q lacks %s", line, opt)
					}
				}
			}
		}
		if strings.Contains(r.Stdout, "WROTE") || !strings.Contains(r.Stdout, "scratch writable") {
			t.Errorf("writable places are not exactly /workspace and /tmp:\n%s", r.Stdout)
		}
	})

	s.close()
	closed = true
	deadline := time.Now().Add(10 * time.Second)
	for left := podmanBoxes(); len(left) > 0; left = podmanBoxes() {
		if time.Now().After(deadline) {
			t.Fatalf("boxes left on %s: %v", host, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if log := s.stderr.String(); strings.Contains(log, "removing box failed") {
		t.Errorf("a box was not removed at once:\n%s", log)
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
