//go:build linux

package boxinit

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ignoredSignals are the signals runbox-init ignores through the runtime:
// every catchable one the runtime lets a program ignore (a _SigNotify
// signal), but SIGCHLD (the child reaper's) and SIGPROF (the runtime's).
var ignoredSignals = []syscall.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGUSR1,
	syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGCONT,
	syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGURG, syscall.SIGXCPU,
	syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGWINCH, syscall.SIGIO, syscall.SIGPWR,
}

// faultSignals are the signals the Go runtime keeps for itself: it turns
// them into a panic or a crash, and signal.Ignore leaves them alone. Sent
// by another process (kill -SEGV 1) they would end PID 1 and the box
// without a report.
var faultSignals = []syscall.Signal{
	syscall.SIGILL, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV,
	syscall.SIGSTKFLT, syscall.SIGSYS,
}

// ignoreSignals makes runbox-init deaf to every signal code in the box can
// send it: ignored, a signal is dropped by the kernel when it is sent,
// whatever its sender claims (kill, tgkill, sigqueue). SIGKILL and SIGSTOP
// from inside the namespace never reach PID 1; the realtime signals the
// runtime does not handle (32–34) keep their default action, which PID 1
// drops.
//
// The fault signals are set to SIG_IGN behind the runtime's back:
// signal.Notify would catch only kill's and tgkill's (si_code SI_USER,
// SI_TKILL), and the runtime still takes sigqueue's (SI_QUEUE) for a
// fault of its own. A real fault in runbox-init is still fatal: the kernel
// forces it through an ignored handler, with no stack trace. Children do
// not inherit these: the runtime resets the handlers it installed before
// each exec.
func ignoreSignals() error {
	signal.Ignore(asSignals(ignoredSignals)...)
	for _, sig := range faultSignals {
		if err := sigIgnore(sig); err != nil {
			return err
		}
	}
	return nil
}

func asSignals(sigs []syscall.Signal) []os.Signal {
	out := make([]os.Signal, len(sigs))
	for i, s := range sigs {
		out[i] = s
	}
	return out
}

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// sigIgnore sets sig's disposition to SIG_IGN with rt_sigaction.
func sigIgnore(sig syscall.Signal) error {
	act := kernelSigaction{handler: 1} // SIG_IGN
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
