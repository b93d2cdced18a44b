package linuxbox

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// KernelLog follows the kernel log for seccomp kills (audit type 1326),
// so that a forbidden_syscall can name the call. The kernel writes one
// record per kill with the uid, the system call and the wall time; the
// server can read it when it runs on the boxes' host with the right to
// read /dev/kmsg (root, or CAP_SYSLOG). Elsewhere the error carries no name.
//
// It also notes the memory cgroups whose OOM killer killed a process: the
// record names the box's cgroup, which ends in its container id. That is
// the word on OOM where the engine has none (a gVisor box, whose sandbox
// process the kernel kills; Podman on cgroup v1).
//
// A nil KernelLog (one that could not be read) answers nothing.
type KernelLog struct {
	mu    sync.Mutex
	kills []seccompKill // the latest, oldest first
	ooms  []string      // the cgroups of the latest OOM kills, oldest first
	fresh chan struct{} // closed and replaced on every new record
}

type seccompKill struct {
	at      time.Time
	uid     int
	compat  bool // the 32-bit ABI (int 0x80)
	syscall int
	comm    string
	// abiOff: not a seccomp record but the kernel's note of an int 0x80
	// that faulted because the kernel runs without the 32-bit ABI (its
	// gate is absent: a general protection fault with error code 0x402,
	// which is (0x80 << 3) | 2). The program dies of SIGSEGV before any
	// filter sees the call. The note names no uid: comm and time match.
	abiOff bool
}

const kernelLogKeep = 64

// int80Fault is the kernel's note of a user process's general protection
// fault at an int 0x80 with no gate: "traps: python3[123] general
// protection fault ip:… sp:… error:402 in …", after the kmsg header
// "PRI,SEQ,USEC,FLAGS;" whose USEC is the monotonic clock's.
var int80Fault = regexp.MustCompile(`^\d+,\d+,(\d+),[^;]*;traps: (.+)\[\d+\] general protection fault ip:[0-9a-f]+ sp:[0-9a-f]+ error:402\b`)

var auditSeccomp = regexp.MustCompile(`type=1326 audit\((\d+)\.(\d+):\d+\):.* uid=(\d+) .*comm="([^"]*)".* sig=31 .*syscall=(\d+) compat=(\d)`)

// FollowKernelLog starts following the kernel log until ctx ends; nil
// when it cannot be read.
func FollowKernelLog(ctx context.Context) *KernelLog {
	f, err := os.Open("/dev/kmsg")
	if err != nil {
		return nil
	}
	// Only what happens from now on.
	if _, err := f.Seek(0, 2); err != nil {
		f.Close()
		return nil
	}
	l := &KernelLog{fresh: make(chan struct{})}
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		// Each read returns one record; a record is at most 8 KiB.
		buf := make([]byte, 8192)
		for {
			n, err := f.Read(buf)
			if err != nil {
				if errors.Is(err, unix.EPIPE) { // records were overwritten; go on
					continue
				}
				return
			}
			if k, ok := parseSeccompKill(buf[:n]); ok {
				l.add(k)
			} else if k, ok := parseInt80Fault(buf[:n], time.Now(), monotonicNow()); ok {
				l.add(k)
			} else if cg, ok := parseOOMKill(buf[:n]); ok {
				l.addOOM(cg)
			}
		}
	}()
	return l
}

func parseSeccompKill(rec []byte) (seccompKill, bool) {
	m := auditSeccomp.FindSubmatch(rec)
	if m == nil {
		return seccompKill{}, false
	}
	sec, _ := strconv.ParseInt(string(m[1]), 10, 64)
	ms, _ := strconv.ParseInt(string(m[2]), 10, 64)
	uid, _ := strconv.Atoi(string(m[3]))
	nr, _ := strconv.Atoi(string(m[5]))
	return seccompKill{at: time.Unix(sec, ms*int64(time.Millisecond)), uid: uid, comm: string(m[4]), syscall: nr, compat: string(m[6]) == "1"}, true
}

// parseInt80Fault reads an int 0x80 fault note; now and mono are the wall
// and monotonic clocks at reading, which date the note's monotonic stamp.
func parseInt80Fault(rec []byte, now time.Time, mono time.Duration) (seccompKill, bool) {
	m := int80Fault.FindSubmatch(rec)
	if m == nil {
		return seccompKill{}, false
	}
	us, _ := strconv.ParseInt(string(m[1]), 10, 64)
	at := now.Add(time.Duration(us)*time.Microsecond - mono)
	return seccompKill{at: at, uid: -1, comm: string(m[2]), abiOff: true}, true
}

func monotonicNow() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// oomKill is the kernel's record of an OOM kill in a memory cgroup:
// "oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/docker/<id>,...".
var oomKill = regexp.MustCompile(`oom-kill:constraint=CONSTRAINT_MEMCG,.*oom_memcg=([^,\s]+)`)

func parseOOMKill(rec []byte) (string, bool) {
	m := oomKill.FindSubmatch(rec)
	if m == nil {
		return "", false
	}
	return string(m[1]), true
}

func (l *KernelLog) addOOM(cgroup string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ooms = keepLatest(append(l.ooms, cgroup))
	l.wake()
}

// wake tells the waiters (await) that a record arrived; under l.mu.
func (l *KernelLog) wake() {
	close(l.fresh)
	l.fresh = make(chan struct{})
}

// keepLatest keeps the latest kernelLogKeep records of list.
func keepLatest[T any](list []T) []T {
	return list[max(0, len(list)-kernelLogKeep):]
}

// await calls found, under the lock, until it says yes or wait is over,
// again each time a record arrives.
func (l *KernelLog) await(wait time.Duration, found func() bool) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok := found()
		fresh := l.fresh
		l.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-fresh:
		case <-deadline.C:
			return false
		}
	}
}

// OOMKilled says whether the kernel killed a process in the memory cgroup
// of container id (the cgroup's name ends in it), waiting up to wait for
// the record to be read.
func (l *KernelLog) OOMKilled(id string, wait time.Duration) bool {
	if l == nil || id == "" {
		return false
	}
	return l.await(wait, func() bool {
		return slices.ContainsFunc(l.ooms, func(cg string) bool { return strings.HasSuffix(cg, id) })
	})
}

func (l *KernelLog) add(k seccompKill) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kills = keepLatest(append(l.kills, k))
	l.wake()
}

// Syscall names the system call a process of uid (and named comm, when
// set) was killed for, waiting up to wait for the record to be read; ""
// when none was seen. The window is the run (since, and
// ended when the box saw its program end: zero when unknown), narrowed to
// killWindow before its end: the kill that ended the program, or in a shell
// script its last command's. Boxes of the same uid are told apart by time
// only, so when records in the window disagree the answer is "" rather
// than another box's call; the kernel also rate-limits these records (by
// default 10 per 5 s), so a burst of kills leaves some unnamed.
func (l *KernelLog) Syscall(since, ended time.Time, uid int, comm string, wait time.Duration) string {
	if l == nil {
		return ""
	}
	until := time.Now()
	if !ended.IsZero() {
		until = ended
	}
	if from := until.Add(-killWindow); from.After(since) {
		since = from
	}
	since, until = since.Add(-auditSlack), until.Add(auditSlack)
	var name string
	l.await(wait, func() (found bool) {
		name, found = l.match(since, until, uid, comm)
		return found
	})
	return name
}

const (
	// killWindow bounds how long before its end a program's fatal kill
	// can be: init reaps at once; a shell notices its child's death and
	// exits within milliseconds.
	killWindow = 250 * time.Millisecond
	// auditSlack covers the audit clock's millisecond resolution.
	auditSlack = 5 * time.Millisecond
)

// match answers the name all records of uid (and of a process named comm,
// when given) in [since, until] agree on; found is false when there is
// none yet.
func (l *KernelLog) match(since, until time.Time, uid int, comm string) (name string, found bool) {
	for _, k := range l.kills {
		if k.abiOff && (comm == "" || k.comm != comm) {
			continue // a fault note names no uid: its comm must match
		}
		if (k.uid != uid && !k.abiOff) || k.at.Before(since) || k.at.After(until) || (comm != "" && k.comm != comm) {
			continue
		}
		n := syscallName(k)
		if found && n != name {
			return "", true
		}
		name, found = n, true
	}
	return name, found
}

// int80WithoutABI names an int 0x80 on a kernel that runs without the
// 32-bit ABI: no filter killed it, the kernel has no such call.
const int80WithoutABI = "int 0x80 (the 32-bit ABI, which this host's kernel has turned off)"

func syscallName(k seccompKill) string {
	if k.abiOff {
		return int80WithoutABI
	}
	if k.compat {
		return "int 0x80 (the 32-bit ABI) system call " + strconv.Itoa(k.syscall)
	}
	if n, ok := syscallNames[k.syscall]; ok {
		return n
	}
	return "system call " + strconv.Itoa(k.syscall)
}
