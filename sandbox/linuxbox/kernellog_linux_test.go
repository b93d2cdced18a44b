package linuxbox

import (
	"context"
	"testing"
	"time"
)

// Records as this machine's kernel wrote them for a box's python3.
const (
	kmsgPtrace = `5,349,204502658,-;audit: type=1326 audit(1795454284.168:2): auid=4294967295 uid=1000 gid=1000 ses=4294967295 pid=19522 comm="python3" exe="/usr/bin/python3.11" sig=31 arch=c000003e syscall=101 compat=0 ip=0x7f9c90192829 code=0x80000000`
	kmsgInt80  = `5,404,215494583,-;audit: type=1326 audit(1795454295.160:5): auid=4294967295 uid=1000 gid=1000 ses=4294967295 pid=19876 comm="python3" exe="/usr/bin/python3.11" sig=31 arch=40000003 syscall=20 compat=1 ip=0x7fe509440007 code=0x0`
	kmsgOther  = `6,340,1356680,-;EXT4-fs (vda): mounted filesystem r/w without journal.`
)

func TestParseSeccompKill(t *testing.T) {
	k, ok := parseSeccompKill([]byte(kmsgPtrace))
	if !ok || k.uid != 1000 || k.syscall != 101 || k.compat || k.comm != "python3" || !k.at.Equal(time.Unix(1795454284, 168e6)) {
		t.Fatalf("ptrace record: %+v %v", k, ok)
	}
	if syscallName(k) != "ptrace" {
		t.Errorf("name %q", syscallName(k))
	}
	k, ok = parseSeccompKill([]byte(kmsgInt80))
	if !ok || !k.compat || syscallName(k) != "int 0x80 (the 32-bit ABI) system call 20" {
		t.Errorf("int 0x80 record: %+v %q", k, syscallName(k))
	}
	if _, ok := parseSeccompKill([]byte(kmsgOther)); ok {
		t.Error("another record parsed as a seccomp kill")
	}
}

func TestSeccompLogFind(t *testing.T) {
	l := &KernelLog{fresh: make(chan struct{})}
	ptrace, _ := parseSeccompKill([]byte(kmsgPtrace)) // at …284.168
	start, ended := time.Unix(1795454284, 0), time.Unix(1795454284, 170e6)
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.add(ptrace)
	}()
	if got := l.Syscall(start, ended, 1000, "", 2*time.Second); got != "ptrace" {
		t.Errorf("waited for the record: %q", got)
	}
	if got := l.Syscall(start, ended, 1001, "", 10*time.Millisecond); got != "" {
		t.Errorf("another uid's kill: %q", got)
	}
	if got := l.Syscall(start.Add(time.Hour), time.Time{}, 1000, "", 10*time.Millisecond); got != "" {
		t.Errorf("an older kill: %q", got)
	}
	if got := l.Syscall(start, time.Unix(1795454284, 100e6), 1000, "", 10*time.Millisecond); got != "" {
		t.Errorf("a kill after the program ended: %q", got)
	}
	// Another box's kill in the same window: no name rather than a
	// wrong one.
	other := ptrace
	other.syscall, other.at = 425, ptrace.at.Add(-50*time.Millisecond)
	l.add(other)
	if got := l.Syscall(start, ended, 1000, "", 10*time.Millisecond); got != "" {
		t.Errorf("two kills in the window: %q", got)
	}
	// Out of the window before the end, it no longer counts.
	if got := l.Syscall(start, ended.Add(300*time.Millisecond), 1000, "", 10*time.Millisecond); got != "" {
		t.Errorf("a kill long before the end: %q", got)
	}
	if got := l.Syscall(start, other.at.Add(time.Millisecond), 1000, "", 10*time.Millisecond); got != "io_uring_setup" {
		t.Errorf("the earlier program's kill: %q", got)
	}
	// The program itself died of the filter: only its own records count.
	// Another process's kill in the window (a shell's unshare in another
	// box of the same uid), its own record missing (rate-limited): no name.
	shell := ptrace
	shell.comm, shell.syscall, shell.at = "unshare", 272, ptrace.at.Add(-10*time.Millisecond)
	l2 := &KernelLog{fresh: make(chan struct{})}
	l2.add(shell)
	if got := l2.Syscall(start, ended, 1000, "python3", 10*time.Millisecond); got != "" {
		t.Errorf("another process's kill named for python3: %q", got)
	}
	if got := l2.Syscall(start, ended, 1000, "", 10*time.Millisecond); got != "unshare" {
		t.Errorf("a shell's child's kill: %q", got)
	}
	l2.add(ptrace)
	if got := l2.Syscall(start, ended, 1000, "python3", 10*time.Millisecond); got != "ptrace" {
		t.Errorf("python3's own kill beside another's: %q", got)
	}
	var none *KernelLog
	if none.Syscall(start, ended, 1000, "", time.Millisecond) != "" {
		t.Error("no kernel log names nothing")
	}
}

// The kernel's note of an int 0x80 on a kernel booted without the 32-bit
// ABI (its gate is absent: error code (0x80 << 3) | 2), and of an ordinary
// general protection fault.
const (
	kmsgInt80Fault = `6,512,215494583,-;traps: python3[19876] general protection fault ip:7fe509440005 sp:7ffd2c1b9e38 error:402 in libffi.so.8.1.2[7fe50943c000+7000]`
	kmsgOtherGP    = `6,513,215494600,-;traps: python3[19877] general protection fault ip:7fe509440005 sp:7ffd2c1b9e38 error:0 in libc.so.6[7fe50943c000+7000]`
)

func TestInt80FaultWithoutABI(t *testing.T) {
	// Read 5 ms after it was written: the note's monotonic stamp is 215.494583 s.
	now, mono := time.Unix(1795454295, 0), 215499583*time.Microsecond
	k, ok := parseInt80Fault([]byte(kmsgInt80Fault), now, mono)
	if !ok || k.comm != "python3" || !k.abiOff || !k.at.Equal(now.Add(-5*time.Millisecond)) {
		t.Fatalf("fault note: %+v %v", k, ok)
	}
	for _, rec := range []string{kmsgOtherGP, kmsgInt80, kmsgOther} {
		if _, ok := parseInt80Fault([]byte(rec), now, mono); ok {
			t.Errorf("parsed as an int 0x80 fault: %s", rec)
		}
	}
	l := &KernelLog{fresh: make(chan struct{})}
	l.add(k)
	since, ended := now.Add(-time.Second), now
	if got := l.Syscall(since, ended, 1000, "python3", 10*time.Millisecond); got != int80WithoutABI {
		t.Errorf("python3's fault: %q", got)
	}
	// The note names no uid: without the program's name it is no one's.
	if got := l.Syscall(since, ended, 1000, "", 10*time.Millisecond); got != "" {
		t.Errorf("a fault matched without a comm: %q", got)
	}
	if got := l.Syscall(since, ended, 1000, "node", 10*time.Millisecond); got != "" {
		t.Errorf("another program's fault: %q", got)
	}
}

// OOM-kill records as this machine's kernel wrote them: a runc box's
// python3, a gVisor box's sandbox process (exe), a Podman box.
const (
	kmsgOOMDocker = `6,4102,12530646806,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=786ac870435aba10f6f952b89adc0225af5291b9ecd72791b631e50ebb0d8a96,mems_allowed=0,oom_memcg=/docker/786ac870435aba10f6f952b89adc0225af5291b9ecd72791b631e50ebb0d8a96,task_memcg=/docker/786ac870435aba10f6f952b89adc0225af5291b9ecd72791b631e50ebb0d8a96,task=python3,pid=30923,uid=1000`
	kmsgOOMGVisor = `6,4140,12549492337,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=1aabca252e2e65c2a53780391d4d062946eea4e1cb9fa91f3b15b93b3dfc4696,mems_allowed=0,oom_memcg=/docker/1aabca252e2e65c2a53780391d4d062946eea4e1cb9fa91f3b15b93b3dfc4696,task_memcg=/docker/1aabca252e2e65c2a53780391d4d062946eea4e1cb9fa91f3b15b93b3dfc4696,task=exe,pid=548,uid=65534`
	kmsgOOMPodman = `6,3990,12362257413,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-9ea8ad29bcd9a9676a07e835ece5fed5c6b7165ae93324b4de002069cbc4a5f9,mems_allowed=0,oom_memcg=/libpod_parent/libpod-9ea8ad29bcd9a9676a07e835ece5fed5c6b7165ae93324b4de002069cbc4a5f9,task_memcg=/libpod_parent/libpod-9ea8ad29bcd9a9676a07e835ece5fed5c6b7165ae93324b4de002069cbc4a5f9,task=python3,pid=27847,uid=1000`
)

func TestOOMKillRecords(t *testing.T) {
	l := &KernelLog{fresh: make(chan struct{})}
	for _, rec := range []string{kmsgOOMDocker, kmsgOOMPodman} {
		cg, ok := parseOOMKill([]byte(rec))
		if !ok {
			t.Fatalf("not parsed: %s", rec)
		}
		l.addOOM(cg)
	}
	if _, ok := parseOOMKill([]byte(kmsgPtrace)); ok {
		t.Error("a seccomp record parsed as an OOM kill")
	}
	gvisor := "1aabca252e2e65c2a53780391d4d062946eea4e1cb9fa91f3b15b93b3dfc4696"
	if l.OOMKilled(gvisor, 10*time.Millisecond) {
		t.Fatal("an OOM kill before its record")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		cg, _ := parseOOMKill([]byte(kmsgOOMGVisor))
		l.addOOM(cg)
	}()
	if !l.OOMKilled(gvisor, 2*time.Second) {
		t.Error("waited for the gVisor box's record")
	}
	for _, id := range []string{"786ac870435aba10f6f952b89adc0225af5291b9ecd72791b631e50ebb0d8a96", "9ea8ad29bcd9a9676a07e835ece5fed5c6b7165ae93324b4de002069cbc4a5f9"} {
		if !l.OOMKilled(id, 0) {
			t.Errorf("%s: no OOM kill found", id[:12])
		}
	}
	if l.OOMKilled("0123456789ab", 0) || l.OOMKilled("", 0) {
		t.Error("an OOM kill for a box that had none")
	}
}

// TestFollowKernelLogEnds: following starts where the log can be read and
// stops with its context; where it cannot, the nil log answers nothing.
func TestFollowKernelLogEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := FollowKernelLog(ctx)
	cancel()
	if got := l.Syscall(time.Now().Add(-time.Second), time.Now(), -2, "", time.Millisecond); got != "" {
		t.Errorf("a call named for no process: %q", got)
	}
	if monotonicNow() <= 0 {
		t.Error("no monotonic clock")
	}
}
