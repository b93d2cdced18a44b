//go:build linux

// Package pollfd reads a blocking pipe or socket through Go's poller.
package pollfd

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Pollable is r, when it is a blocking pipe or socket, made non-blocking
// and read through Go's poller: a read waits parked, not in the kernel.
// A read blocked in the kernel holds its P in a system call, which the
// runtime's monitor (sysmon) takes back and hands to another thread
// while other goroutines run, polling every 20 µs from then on; the
// thread that returns from the read finds its P gone and wakes the
// monitor again: threads woken and switched on every message. Parked,
// the reader costs none of that. Anything else (a terminal, whose flags
// are its shell's too; a regular file; a reader that is no file; a pipe
// already non-blocking) is left as it is.
func Pollable(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	c, err := f.SyscallConn()
	if err != nil {
		return r
	}
	fd := -1
	_ = c.Control(func(u uintptr) { fd = int(u) })
	var st unix.Stat_t
	if fd < 0 || unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return r
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 || unix.SetNonblock(fd, true) != nil {
		return r
	}
	// Kept reachable for good: a File that is collected closes its
	// descriptor, which f holds too.
	nf := os.NewFile(uintptr(fd), f.Name())
	polled = append(polled, nf)
	if nf.SetReadDeadline(time.Time{}) != nil {
		// The poller did not take it (a kernel whose pipes it cannot
		// wait on): reads stay blocking, through f.
		_ = unix.SetNonblock(fd, false)
		return r
	}
	return nf
}

// polled are the Files Pollable made.
var polled []*os.File
