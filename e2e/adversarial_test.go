//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"golang.org/x/sys/unix"
)

// The adversarial suite: code written to escape, leak, exhaust or forge.
// Every case asserts the safe outcome, that nothing it printed says
// ESCAPED or holds the server's fake secret, and that the next run on the
// same server starts clean (no file, no process left over).

type attack struct {
	name, lang, code string
	args             []any // extra run_code arguments, name then value
	want             func(t *testing.T, r contract.Result)
}

// safeOK: the run succeeds; every attempt inside it failed.
func safeOK(t *testing.T, r contract.Result) { mustOK(t, r) }

func refused(kind contract.Kind, limit contract.Limit) func(*testing.T, contract.Result) {
	return func(t *testing.T, r contract.Result) { wantError(t, r, kind, limit) }
}

// oneOf accepts any of the listed kinds (a fork bomb may hit the pids
// limit or the deadline first, both safe).
func oneOf(kinds ...contract.Kind) func(*testing.T, contract.Result) {
	return func(t *testing.T, r contract.Result) {
		t.Helper()
		if r.Error == nil || !slices.Contains(kinds, r.Error.Kind) {
			t.Fatalf("want one of %v, got status %s error %+v\nstderr: %.1000s", kinds, r.Status, r.Error, r.Stderr)
		}
	}
}

func stdoutIs(want string) func(*testing.T, contract.Result) {
	return func(t *testing.T, r contract.Result) {
		t.Helper()
		mustOK(t, r)
		if r.Stdout != want {
			t.Fatalf("stdout %q, want %q\nstderr: %s", r.Stdout, want, r.Stderr)
		}
	}
}

// forbidden: killed by the seccomp profile. Run in parallel, kills can
// share a window or be rate-limited out of the kernel log, so the name is
// checked in TestForbiddenSyscallNamed.
func forbidden(t *testing.T, r contract.Result) {
	t.Helper()
	wantError(t, r, contract.KindForbiddenSyscall, "")
}

// int80Refused: an int 0x80 never runs. On a kernel with the 32-bit ABI the
// profile kills it (forbidden_syscall); on one without it the kernel
// faults it first (SIGSEGV), which runbox names as a forbidden_syscall
// when it can read the kernel's note of the fault, and answers as the
// signal it is when it cannot (the note is rate-limited, or unreadable).
func int80Refused(t *testing.T, r contract.Result) {
	t.Helper()
	if host32BitABI(t) {
		forbidden(t, r)
		return
	}
	if r.Error == nil {
		t.Fatalf("int 0x80 on a kernel without the 32-bit ABI ran: status %s stdout %q", r.Status, r.Stdout)
	}
	switch e := r.Error; {
	case e.Kind == contract.KindForbiddenSyscall && (e.Syscall == "" || strings.Contains(e.Syscall, "turned off")):
	case e.Kind == contract.KindRuntime && strings.Contains(e.Message, "SIGSEGV"):
	default:
		t.Fatalf("int 0x80 on a kernel without the 32-bit ABI: %+v", e)
	}
}

// host32BitABI says whether this host's kernel runs 32-bit system calls
// (int 0x80), asked once of a box of the sandbox image with no seccomp
// profile: a kernel booted without IA32 emulation (ia32_emulation=0, or
// built so by default) faults them with SIGSEGV before any filter sees
// them.
func host32BitABI(t testing.TB) bool {
	t.Helper()
	abi32Once.Do(func() {
		out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--user", "1000",
			"--security-opt", "seccomp=unconfined", "runbox/sandbox:bookworm", "python3", "-c", int80).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil && strings.HasPrefix(string(out), "ESCAPED "):
			abi32 = true
		case errors.As(err, &exit) && exit.ExitCode() == 128+int(unix.SIGSEGV):
			abi32 = false
		default:
			abi32Err = fmt.Errorf("the 32-bit ABI probe: %v\n%s", err, out)
		}
	})
	if abi32Err != nil {
		t.Fatal(abi32Err)
	}
	return abi32
}

var (
	abi32Once sync.Once
	abi32     bool
	abi32Err  error
)

// TestForbiddenSyscallNamed: one kill at a time, the result names the call
// when the server can read the kernel log (it runs as root here).
func TestForbiddenSyscallNamed(t *testing.T) {
	if !kernelLogReadable() {
		t.Skip("the kernel log is not readable: results cannot name the call")
	}
	// The kernel lets 10 audit records through per 5 s: start afresh.
	time.Sleep(5 * time.Second)
	for _, c := range []struct{ name, lang, code string }{
		{"ptrace", "python", pySyscall(unix.SYS_PTRACE)},
		{"io_uring_setup", "python", pySyscall(unix.SYS_IO_URING_SETUP)},
		{"unshare", "bash", "echo trying\nunshare -U true"},
		{"int 0x80 (the 32-bit ABI) system call 20", "python", int80},
	} {
		r := run(t, c.lang, c.code)
		if c.code == int80 && !host32BitABI(t) {
			int80Refused(t, r)
			continue
		}
		e := wantError(t, r, contract.KindForbiddenSyscall, "")
		if e.Syscall != c.name || !strings.Contains(e.Message, c.name) {
			t.Errorf("%s: syscall %q, message %q", c.name, e.Syscall, e.Message)
		}
	}
}

// int80 makes a 32-bit system call (getpid) through int 0x80.
const int80 = "import ctypes, mmap\ncode = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])\nm = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\nm.write(code)\nf = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))\nprint('ESCAPED', f())\n"

func kernelLogReadable() bool {
	f, err := os.Open("/dev/kmsg")
	if err == nil {
		f.Close()
	}
	return err == nil
}

// pySyscall calls a system call by number with zero arguments.
func pySyscall(nr int) string {
	return fmt.Sprintf("import ctypes\nprint('calling', flush=True)\nctypes.CDLL(None, use_errno=True).syscall(%d, 0, 0, 0, 0, 0)\nprint('ESCAPED: the call returned')\n", nr)
}

func attacks() []attack {
	a := []attack{
		// Writes outside the workspace.
		{name: "fs/etc", lang: "bash", code: "echo evil >> /etc/passwd 2>/dev/null && echo ESCAPED; mkdir /etc/x 2>/dev/null && echo ESCAPED; true", want: safeOK},
		{name: "fs/interpreter", lang: "python", code: "try:\n    open('/usr/lib/python3.11/os.py', 'a').write('#')\n    print('ESCAPED')\nexcept OSError as e:\n    print('refused')\n", want: stdoutIs("refused\n")},
		{name: "fs/init-volume", lang: "bash", code: "cp /bin/true /.runbox/runbox-init 2>/dev/null && echo ESCAPED; : > /.runbox/x 2>/dev/null && echo ESCAPED; true", want: safeOK},
		{name: "fs/proc-sys", lang: "bash", code: "echo evil > /proc/sys/kernel/hostname 2>/dev/null && echo ESCAPED; echo b > /proc/sysrq-trigger 2>/dev/null && echo ESCAPED; true", want: safeOK},
		{name: "fs/cgroup-limits", lang: "bash", code: "echo -1 > /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null && echo ESCAPED; echo max > /sys/fs/cgroup/pids/pids.max 2>/dev/null && echo ESCAPED; true", want: safeOK},
		{name: "fs/devices", lang: "bash", code: "ls /dev | grep -E '^(sd|vd|nvme|xvd|hd|mem|kmem|port|kmsg)' && echo ESCAPED; echo x > /dev/full 2>/dev/null && echo ESCAPED; true", want: safeOK},

		// Host mounts and the engine's socket.
		{name: "mounts/engine-socket", lang: "bash", code: "for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock /run/podman/podman.sock; do [ -e $s ] && echo ESCAPED $s; done; find / -xdev -type s 2>/dev/null | grep . && echo ESCAPED; true", want: safeOK},
		{name: "mounts/no-host-paths", lang: "bash", code: "awk '{print $5}' /proc/self/mountinfo | grep -vxE '/|/proc(/.*)?|/dev(/.*)?|/sys(/.*)?|/workspace|/tmp|/\\.runbox|/etc/(hosts|hostname|resolv\\.conf)' | sed 's/^/ESCAPED mount /'; true", want: safeOK},
		{name: "mounts/masked-kernel-files", lang: "bash", code: "for f in /proc/kcore /proc/keys /proc/timer_list /proc/interrupts /proc/sched_debug; do n=$(head -c 64 $f 2>/dev/null | wc -c); [ $n -gt 0 ] && echo ESCAPED $f; done; true", want: safeOK},
		{name: "mounts/own-pid-namespace", lang: "bash", code: "n=$(ls /proc | grep -cE '^[0-9]+$'); [ $n -gt 8 ] && echo ESCAPED $n processes visible; true", want: safeOK},

		// Secrets of the server.
		{name: "secrets/environment", lang: "python", code: "import os\nprint(dict(os.environ))\n", want: safeOK},
		{name: "secrets/proc-environ", lang: "bash", code: "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; true", want: safeOK},
		{name: "secrets/grep-everywhere", lang: "bash", code: "p=sk-; p=${p}live; grep -rsl $p /etc /proc/1 /workspace /tmp /.runbox 2>/dev/null | sed 's/^/ESCAPED /'; true", args: []any{"timeout_seconds", 30}, want: safeOK},
		{name: "secrets/into-artifact", lang: "python", code: "import os\nopen('env.txt', 'w').write(repr(dict(os.environ)))\n", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if len(r.Artifacts) != 1 {
				t.Fatalf("artifacts %+v", r.Artifacts)
			}
		}},

		// Network.
		{name: "net/egress", lang: "python", code: "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 443), timeout=3); print('ESCAPED')\nexcept OSError as e:\n    print('refused')\n", want: stdoutIs("refused\n")},
		{name: "net/dns", lang: "python", code: "import socket\ntry:\n    socket.getaddrinfo('example.com', 80); print('ESCAPED')\nexcept OSError:\n    print('no dns')\n", want: stdoutIs("no dns\n")},
		{name: "net/host-gateway", lang: "bash", code: "(exec 3<>/dev/tcp/172.17.0.1/2375) 2>/dev/null && echo ESCAPED; (exec 3<>/dev/tcp/169.254.169.254/80) 2>/dev/null && echo ESCAPED; true", want: safeOK},
		{name: "net/ipv6", lang: "python", code: "import socket\ntry:\n    socket.create_connection(('2606:4700:4700::1111', 443), timeout=3); print('ESCAPED')\nexcept OSError:\n    print('refused')\n", want: stdoutIs("refused\n")},
		{name: "net/interfaces", lang: "python", code: "import socket\nprint([n for _, n in socket.if_nameindex()])\n", want: stdoutIs("['lo']\n")},
		{name: "net/raw-icmp", lang: "python", code: "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print('ESCAPED')\nexcept OSError as e:\n    print(e.errno)\n", want: stdoutIs("1\n")},
		{name: "net/packet", lang: "python", code: "import socket\ntry:\n    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print('ESCAPED')\nexcept OSError as e:\n    print(e.errno)\n", want: stdoutIs("1\n")},
		{name: "net/vsock", lang: "python", code: "import socket\ntry:\n    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print('ESCAPED')\nexcept OSError as e:\n    print(e.errno)\n", want: stdoutIs("1\n")},
		{name: "net/alg", lang: "python", code: "import socket\ntry:\n    socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET); print('ESCAPED')\nexcept OSError as e:\n    print(e.errno)\n", want: stdoutIs("1\n")},

		// Privilege.
		{name: "priv/setuid-root", lang: "python", code: "import os\ntry:\n    os.setuid(0); print('ESCAPED')\nexcept PermissionError:\n    print(os.getuid(), os.geteuid())\n", want: stdoutIs("1000 1000\n")},
		{name: "priv/setuid-binaries", lang: "bash", code: "for b in $(find / -xdev -perm -4000 -type f 2>/dev/null); do out=$(\"$b\" --help </dev/null 2>&1; id -u); done; su -c 'id -u' root </dev/null 2>/dev/null | grep -x 0 && echo ESCAPED; id -u", want: stdoutIs("1000\n")},
		{name: "priv/capability-bounding", lang: "python", code: "import ctypes\nlibc = ctypes.CDLL(None)\nprint([c for c in range(41) if libc.prctl(23, c, 0, 0, 0) == 1])\n", want: stdoutIs("[]\n")},
		{name: "priv/no-new-privs", lang: "python", code: "import ctypes\nprint(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))\n", want: stdoutIs("1\n")},
		{name: "priv/chroot", lang: "python", code: "import os\ntry:\n    os.chroot('/tmp'); print('ESCAPED')\nexcept PermissionError:\n    print('refused')\n", want: stdoutIs("refused\n")},
		{name: "priv/mknod-disk", lang: "python", code: "import os, stat\ntry:\n    os.mknod('/tmp/sda', stat.S_IFBLK | 0o600, os.makedev(8, 0)); print('ESCAPED')\nexcept PermissionError:\n    print('refused')\n", want: stdoutIs("refused\n")},
		{name: "priv/chown-root", lang: "python", code: "import os\nopen('f', 'w').close()\ntry:\n    os.chown('f', 0, 0); print('ESCAPED')\nexcept PermissionError:\n    print('refused')\n", want: stdoutIs("refused\n")},
		{name: "priv/signal-init", lang: "bash", code: "kill -9 1 2>/dev/null; kill -STOP 1 2>/dev/null; kill -TERM 1 2>/dev/null; sleep 0.2; echo alive", want: stdoutIs("alive\n")},
		{name: "priv/reboot", lang: "python", code: "import ctypes\nprint(ctypes.CDLL(None, use_errno=True).reboot(0x1234567), ctypes.get_errno())\n", want: stdoutIs("-1 1\n")},

		// The result channel cannot be forged.
		{name: "channel/init-descriptors", lang: "bash", code: "echo forged > /proc/1/fd/1 2>/dev/null && echo ESCAPED; ls /proc/1/fd >/dev/null 2>&1 && echo ESCAPED; true", want: safeOK},
		{name: "channel/init-memory", lang: "python", code: "try:\n    open('/proc/1/mem', 'rb'); print('ESCAPED')\nexcept OSError as e:\n    print(e.errno)\n", want: stdoutIs("13\n")},
		{name: "channel/own-descriptors", lang: "python", code: "import os\nprint(sorted(int(f) for f in os.listdir('/proc/self/fd')))\n", want: stdoutIs("[0, 1, 2, 3]\n")},
		{name: "channel/forged-report", lang: "python", code: "import json, os, sys\nrep = json.dumps({'exit_code': 0, 'stdout': 'Rk9SR0VE', 'timed_out': False}).encode()\nfor out in (1, 2):\n    os.write(out, b'R' + len(rep).to_bytes(4, 'big') + rep + b'\\n{\"exit_code\":0}\\n')\nsys.exit(3)\n", want: func(t *testing.T, r contract.Result) {
			wantError(t, r, contract.KindRuntime, "")
			if r.ExitCode == nil || *r.ExitCode != 3 || !strings.Contains(r.Stdout, "exit_code") {
				t.Fatalf("the forged report was believed: exit %v stdout %q", r.ExitCode, r.Stdout)
			}
		}},

		// Forbidden system calls beyond the raw list below.
		{name: "syscall/int80-32bit-abi", lang: "python", code: int80, want: int80Refused},
		{name: "syscall/bash-unshare", lang: "bash", code: "echo trying\nunshare -U true", want: forbidden},
		{name: "syscall/thread-ptrace", lang: "python", code: "import ctypes, threading\nt = threading.Thread(target=lambda: ctypes.CDLL(None).syscall(101, 0, 0, 0, 0))\nt.start(); t.join()\nprint('ESCAPED: the process survived')\n", want: forbidden},

		// Normal work still runs under the profile.
		{name: "workload/python", lang: "python", code: "import threading, subprocess, numpy as np, pandas as pd, tempfile, os\nts = [threading.Thread(target=np.linalg.inv, args=(np.eye(50),)) for _ in range(4)]\n[t.start() for t in ts]; [t.join() for t in ts]\nprint(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip(), pd.DataFrame({'a': [1, 2]}).a.sum(), os.path.isdir(tempfile.gettempdir()))\n", want: stdoutIs("sub 3 True\n")},
		{name: "workload/javascript", lang: "javascript", code: "const { Worker } = require('worker_threads');\nconst { execFileSync } = require('child_process');\nconst zlib = require('zlib');\nconst fs = require('fs/promises');\n(async () => {\n  await fs.writeFile('/tmp/a', 'x');\n  const w = await new Promise(r => new Worker('require(\"worker_threads\").parentPort.postMessage(2)', { eval: true }).on('message', r));\n  console.log(w, execFileSync('echo', ['sub']).toString().trim(), zlib.gunzipSync(zlib.gzipSync('z')).toString(), (await fs.readFile('/tmp/a')).toString());\n})();\n", want: stdoutIs("2 sub z x\n")},
		{name: "workload/bash", lang: "bash", code: "seq 1 1000 | sort -rn | head -1 | tee /tmp/x >/dev/null; (sleep 0.1 & wait); echo $(cat /tmp/x) $(printf '%s' abc | sha256sum | cut -c1-8)", want: stdoutIs("1000 ba7816bf\n")},

		// Bombs, spinners and sleepers.
		{name: "bomb/threads", lang: "python", code: "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n", args: []any{"timeout_seconds", 20}, want: refused(contract.KindResourceLimit, contract.LimitPids)},
		{name: "bomb/classic-fork", lang: "bash", code: "f() { f | f & }; f; sleep 10", args: []any{"timeout_seconds", 5}, want: oneOf(contract.KindResourceLimit, contract.KindTimeout)},
		{name: "spin/ignores-signals", lang: "python", code: "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n", args: []any{"timeout_seconds", 2}, want: refused(contract.KindTimeout, contract.LimitWallTime)},
		{name: "sleep/ignores-signals", lang: "bash", code: "trap '' TERM INT HUP; sleep 600", args: []any{"timeout_seconds", 2}, want: refused(contract.KindTimeout, contract.LimitWallTime)},
		{name: "sleep/detached-daemon", lang: "bash", code: "setsid bash -c 'trap \"\" TERM HUP; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &\necho started", want: stdoutIs("started\n")},
		{name: "memory/numpy", lang: "python", code: "import numpy as np\na = np.ones(100_000_000)\nprint('ESCAPED', a.sum())\n", args: []any{"timeout_seconds", 60}, want: refused(contract.KindOOM, contract.LimitMemory)},
		{name: "memory/javascript-arrays", lang: "javascript", code: "const a = [];\nwhile (true) a.push(new Float64Array(1 << 20).fill(1));\n", args: []any{"timeout_seconds", 60}, want: refused(contract.KindOOM, contract.LimitMemory)},

		// Disk.
		{name: "disk/workspace-dd", lang: "bash", code: "dd if=/dev/zero of=/workspace/fill bs=1M count=500 2>&1", want: refused(contract.KindResourceLimit, contract.LimitDisk)},
		{name: "disk/tmp-python", lang: "python", code: "with open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(b'\\0' * (1 << 20))\n", want: refused(contract.KindResourceLimit, contract.LimitDisk)},
		{name: "disk/inodes-python", lang: "python", code: "import os\nos.mkdir('/tmp/d')\nfor i in range(100000):\n    open(f'/tmp/d/{i}', 'w').close()\n", args: []any{"timeout_seconds", 60}, want: refused(contract.KindResourceLimit, contract.LimitDisk)},

		// Output.
		{name: "output/stderr-flood", lang: "python", code: "import sys\nfor _ in range(10000):\n    sys.stderr.write('e' * 1000 + '\\n')\n", want: func(t *testing.T, r contract.Result) {
			wantError(t, r, contract.KindOutputLimit, "")
			if !r.StderrTruncated || len(r.Stderr) > int(lim.OutputBytes)+200 {
				t.Fatalf("stderr truncated %v, %d bytes", r.StderrTruncated, len(r.Stderr))
			}
		}},
		{name: "output/binary", lang: "python", code: "import os\nos.write(1, bytes(range(256)) * 200)\n", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if !strings.Contains(r.Stdout, "\uFFFD") {
				t.Fatal("invalid UTF-8 was not replaced")
			}
		}},
		{name: "output/one-long-line", lang: "javascript", code: "process.stdout.write('y'.repeat(5e6));\n", want: refused(contract.KindOutputLimit, "")},

		// Artifacts.
		{name: "artifacts/symlinks-out", lang: "bash", code: "ln -s /etc/shadow shadow; ln -s /proc/self/root root; ln -s . loop; ln -s /proc/1/environ env; echo ok", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if len(r.Artifacts) != 0 {
				t.Fatalf("symlinks became artifacts: %+v", r.Artifacts)
			}
		}},
		{name: "artifacts/hardlink-out", lang: "bash", code: "ln /etc/passwd passwd 2>/dev/null && echo ESCAPED; true", want: safeOK},
		{name: "artifacts/fifo", lang: "bash", code: "mkfifo pipe; mkfifo out.txt 2>/dev/null; echo made", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if len(r.Artifacts) != 0 {
				t.Fatalf("fifos became artifacts: %+v", r.Artifacts)
			}
		}},
		{name: "artifacts/thousands", lang: "python", code: "import os\nos.mkdir('many')\nfor i in range(5000):\n    open(f'many/{i}.txt', 'w').write(str(i))\n", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if len(r.Artifacts) != lim.Artifacts || r.ArtifactsOmitted != 5000-lim.Artifacts {
				t.Fatalf("%d artifacts, %d omitted", len(r.Artifacts), r.ArtifactsOmitted)
			}
		}},
		{name: "artifacts/sparse-huge", lang: "python", code: "with open('sparse.bin', 'wb') as f:\n    f.truncate(60 * 1024 * 1024)\n", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if len(r.Artifacts) != 1 || !r.Artifacts[0].ContentOmitted {
				t.Fatalf("artifacts %+v", r.Artifacts)
			}
		}},
		{name: "artifacts/odd-names", lang: "bash", code: "touch $'new\\nline.txt' $'tab\\tname.txt' 'ünï cödé.txt' -- '-rf'; echo ok", want: func(t *testing.T, r contract.Result) {
			mustOK(t, r)
			if len(r.Artifacts) != 4 {
				t.Fatalf("artifacts %+v", r.Artifacts)
			}
		}},

		// Persistence across runs: the next run (see cleanNext) finds nothing.
		{name: "persist/files", lang: "bash", code: "echo mark > /workspace/marker; echo mark > /tmp/marker; echo ok", want: safeOK},
		{name: "persist/background", lang: "bash", code: "nohup sleep 300 >/dev/null 2>&1 &\necho ok", want: stdoutIs("ok\n")},
	}
	for _, s := range []struct {
		name string
		nr   int
	}{
		{"ptrace", unix.SYS_PTRACE}, {"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
		{"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
		{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2}, {"pivot_root", unix.SYS_PIVOT_ROOT},
		{"unshare", unix.SYS_UNSHARE}, {"setns", unix.SYS_SETNS}, {"userfaultfd", unix.SYS_USERFAULTFD},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV}, {"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
		{"kexec_load", unix.SYS_KEXEC_LOAD}, {"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE},
		{"delete_module", unix.SYS_DELETE_MODULE}, {"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP}, {"fsopen", unix.SYS_FSOPEN},
	} {
		a = append(a, attack{name: "syscall/" + s.name, lang: "python", code: pySyscall(s.nr), want: forbidden})
	}
	return a
}

func TestAdversarial(t *testing.T) {
	cases := attacks()
	if len(cases) < 50 {
		t.Fatalf("only %d adversarial cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := map[string]any{"language": c.lang, "code": c.code}
			for i := 0; i+1 < len(c.args); i += 2 {
				args[c.args[i].(string)] = c.args[i+1]
			}
			r, res := shared(t).call(t, args)
			raw, _ := json.Marshal(res)
			if strings.Contains(string(raw), fakeSecret) {
				t.Errorf("the server's secret reached the result")
			}
			if strings.Contains(r.Stdout+r.Stderr, "ESCAPED") {
				t.Errorf("an attempt succeeded:\nstdout: %.2000s\nstderr: %.2000s", r.Stdout, r.Stderr)
			}
			c.want(t, r)
			cleanNext(t)
		})
	}
}

// cleanNext runs a probe after an attack: the workspace holds only the
// probe's own code, /tmp holds only what runbox-init writes into every
// new box (/tmp/.runbox: the display libraries and their spool), and no
// process but the probe's runs.
func cleanNext(t *testing.T) {
	t.Helper()
	r := run(t, "bash", "find /workspace /tmp -mindepth 1 ! -path /workspace/main.sh ! -path /tmp/.runbox ! -path '/tmp/.runbox/*'; ps -eo comm= | grep -vxE 'runbox-init|bash|ps|grep'; true")
	mustOK(t, r)
	if r.Stdout != "" {
		t.Fatalf("the next run is not clean:\n%s", r.Stdout)
	}
}
