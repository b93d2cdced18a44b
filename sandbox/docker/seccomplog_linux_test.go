package docker

import (
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
	l := &seccompLog{fresh: make(chan struct{})}
	ptrace, _ := parseSeccompKill([]byte(kmsgPtrace)) // at …284.168
	start, ended := time.Unix(1795454284, 0), time.Unix(1795454284, 170e6)
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.add(ptrace)
	}()
	if got := l.find(start, ended, 1000, 2*time.Second); got != "ptrace" {
		t.Errorf("waited for the record: %q", got)
	}
	if got := l.find(start, ended, 1001, 10*time.Millisecond); got != "" {
		t.Errorf("another uid's kill: %q", got)
	}
	if got := l.find(start.Add(time.Hour), time.Time{}, 1000, 10*time.Millisecond); got != "" {
		t.Errorf("an older kill: %q", got)
	}
	if got := l.find(start, time.Unix(1795454284, 100e6), 1000, 10*time.Millisecond); got != "" {
		t.Errorf("a kill after the program ended: %q", got)
	}
	// Another box's kill in the same window: no name rather than a
	// wrong one.
	other := ptrace
	other.syscall, other.at = 425, ptrace.at.Add(-50*time.Millisecond)
	l.add(other)
	if got := l.find(start, ended, 1000, 10*time.Millisecond); got != "" {
		t.Errorf("two kills in the window: %q", got)
	}
	// Out of the window before the end, it no longer counts.
	if got := l.find(start, ended.Add(300*time.Millisecond), 1000, 10*time.Millisecond); got != "" {
		t.Errorf("a kill long before the end: %q", got)
	}
	if got := l.find(start, other.at.Add(time.Millisecond), 1000, 10*time.Millisecond); got != "io_uring_setup" {
		t.Errorf("the earlier program's kill: %q", got)
	}
	var none *seccompLog
	if none.find(start, ended, 1000, time.Millisecond) != "" {
		t.Error("no kernel log names nothing")
	}
}
