//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

var lim = manifest.Default().Limits

// Each test checks one item of the isolation profile from inside a box.

func TestIsolationNoNetwork(t *testing.T) {
	r := run(t, "python", `
import os, socket
print(sorted(os.listdir("/sys/class/net")))
for target in [("1.1.1.1", 53), ("172.17.0.1", 2375)]:
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect(target); print("CONNECTED", target)
    except OSError as e:
        print("refused", e.errno)
try:
    socket.getaddrinfo("example.com", 80); print("RESOLVED")
except OSError:
    print("no dns")`)
	mustOK(t, r)
	if !strings.HasPrefix(r.Stdout, "['lo']\n") || strings.Contains(r.Stdout, "CONNECTED") || strings.Contains(r.Stdout, "RESOLVED") {
		t.Fatalf("the box has a network:\n%s", r.Stdout)
	}
}

func statusField(t *testing.T, field string) string {
	t.Helper()
	r := run(t, "bash", "grep '^"+field+":' /proc/self/status")
	mustOK(t, r)
	return strings.TrimSpace(strings.TrimPrefix(r.Stdout, field+":"))
}

func TestIsolationNoCapabilities(t *testing.T) {
	for _, f := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if v := statusField(t, f); v != "0000000000000000" {
			t.Errorf("%s = %s, want none", f, v)
		}
	}
}

func TestIsolationNoNewPrivileges(t *testing.T) {
	if v := statusField(t, "NoNewPrivs"); v != "1" {
		t.Fatalf("NoNewPrivs = %s", v)
	}
}

func TestIsolationSeccomp(t *testing.T) {
	if v := statusField(t, "Seccomp"); v != "2" {
		t.Fatalf("Seccomp = %s, want 2 (filter)", v)
	}
}

func TestIsolationReadOnlyRoot(t *testing.T) {
	r := run(t, "bash", `for p in /etc/x /usr/bin/x /x /.runbox/x /dev/shm/x /var/tmp/x; do touch $p 2>/dev/null && echo "WROTE $p"; done; touch /workspace/ok /tmp/ok && echo writable`)
	mustOK(t, r)
	if r.Stdout != "writable\n" {
		t.Fatalf("writable outside /workspace and /tmp:\n%s", r.Stdout)
	}
}

func TestIsolationScratchMountsAreCappedTmpfs(t *testing.T) {
	r := run(t, "bash", `grep -E ' /(workspace|tmp) ' /proc/mounts`)
	mustOK(t, r)
	for _, want := range []string{"/workspace tmpfs rw,nosuid,nodev", "/tmp tmpfs rw,nosuid,nodev", "size=" + strconv.FormatInt(int64(lim.WorkspaceBytes)/1024, 10) + "k", "nr_inodes=" + strconv.FormatInt(lim.WorkspaceFiles, 10)} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("mounts lack %q:\n%s", want, r.Stdout)
		}
	}
}

func TestIsolationNonRoot(t *testing.T) {
	r := run(t, "bash", "id -u; id -g")
	mustOK(t, r)
	if r.Stdout != "1000\n1000\n" {
		t.Fatalf("uid/gid:\n%s", r.Stdout)
	}
}

func TestIsolationEmptyEnvironment(t *testing.T) {
	r := run(t, "python", "import os; print(sorted(os.environ)); print(os.environ['PYTHONPATH'])")
	mustOK(t, r)
	// PYTHONPATH names runbox-init's display library (display(),
	// plt.show()), written into every box; nothing of the host's.
	want := "['HOME', 'LANG', 'MPLBACKEND', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONPATH', 'PYTHONUNBUFFERED', 'TMPDIR']\n/tmp/.runbox/display\n"
	if r.Stdout != want {
		t.Fatalf("environment:\n%s\nwant %s", r.Stdout, want)
	}
	r = run(t, "bash", "cat /proc/1/environ /proc/self/environ 2>&1 | tr '\\0' '\\n'; env")
	if strings.Contains(r.Stdout+r.Stderr, fakeSecret) {
		t.Fatal("the server's secret reached the box")
	}
}

func TestIsolationMemoryWithoutSwap(t *testing.T) {
	r := run(t, "bash", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || echo no-swap-accounting")
	mustOK(t, r)
	lines := strings.Fields(r.Stdout)
	if lines[0] != strconv.FormatInt(int64(lim.Memory), 10) || (lines[1] != lines[0] && lines[1] != "no-swap-accounting") {
		t.Fatalf("memory limits:\n%s", r.Stdout)
	}
}

func TestIsolationCPUQuota(t *testing.T) {
	r := run(t, "bash", "echo $(( $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) * 1000 / $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us) ))")
	mustOK(t, r)
	if got, want := strings.TrimSpace(r.Stdout), strconv.Itoa(int(lim.CPUs*1000)); got != want {
		t.Fatalf("CPU quota in millicores: %s, want %s", got, want)
	}
}

func TestIsolationPidsLimit(t *testing.T) {
	r := run(t, "bash", "cat /sys/fs/cgroup/pids/pids.max")
	mustOK(t, r)
	if got := strings.TrimSpace(r.Stdout); got != strconv.FormatInt(lim.Pids, 10) {
		t.Fatalf("pids.max = %s", got)
	}
}

func TestIsolationUlimits(t *testing.T) {
	r := run(t, "bash", "ulimit -n; ulimit -c; ulimit -f")
	mustOK(t, r)
	want := strconv.FormatInt(lim.OpenFiles, 10) + "\n0\n" + strconv.FormatInt(int64(lim.WorkspaceBytes)/1024, 10) + "\n"
	if r.Stdout != want {
		t.Fatalf("ulimits:\n%s\nwant\n%s", r.Stdout, want)
	}
}

func TestIsolationOwnInitNotDockerInit(t *testing.T) {
	r := run(t, "bash", "tr '\\0' ' ' < /proc/1/cmdline; echo; ls /dev/init /sbin/docker-init 2>&1 | grep -v 'No such' || true; ls -l /proc/1/fd 2>&1 | head -1")
	mustOK(t, r)
	lines := strings.Split(r.Stdout, "\n")
	if strings.TrimSpace(lines[0]) != sandbox.InitPath {
		t.Errorf("PID 1 is %q, want runbox-init", lines[0])
	}
	if !strings.Contains(r.Stdout, "Permission denied") {
		t.Errorf("PID 1's descriptors are readable from the program (it must be non-dumpable):\n%s", r.Stdout)
	}
	if strings.Contains(r.Stdout, "docker-init") {
		t.Errorf("docker-init is mounted:\n%s", r.Stdout)
	}
}

func TestIsolationLabelledAndRemoved(t *testing.T) {
	s := shared(t)
	done := make(chan contract.Result, 1)
	go func() {
		r, _ := s.call(t, map[string]any{"language": "bash", "code": "sleep 3; echo slept"})
		done <- r
	}()
	var seen []string
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) == 0 && time.Now().Before(deadline) {
		seen = boxes("label=" + sandbox.LabelLanguage + "=bash")
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) == 0 {
		t.Fatal("no labelled box seen while a run was in progress")
	}
	r := <-done
	mustOK(t, r)
	if left := waitNoBoxes(5*time.Second, "label="+sandbox.LabelRunID+"="+r.RunID); len(left) > 0 {
		t.Fatalf("box of run %s not removed: %v", r.RunID, left)
	}
}

func TestIsolationFreshBoxEachRun(t *testing.T) {
	r := run(t, "bash", "echo persisted > /workspace/state; echo persisted > /tmp/state; (sleep 30 &) ; echo ok")
	mustOK(t, r)
	r = run(t, "bash", "ls /workspace /tmp; pgrep -c sleep || true")
	mustOK(t, r)
	if strings.Contains(r.Stdout, "state") || !strings.HasSuffix(r.Stdout, "0\n") {
		t.Fatalf("state survived between runs:\n%s", r.Stdout)
	}
}
