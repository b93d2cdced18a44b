//go:build linux

package boxinit

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// trampolineArg makes runbox-init act as the trampoline: a process that
// applies the program's own limits to itself and then execs it, so that
// none of them touch PID 1.
const trampolineArg = "__exec"

// execErrFd is where the trampoline reports a failed exec; it is closed on
// a successful exec, so the program never sees it.
const execErrFd = 3

func trampoline(args []string) int {
	errOut := os.NewFile(execErrFd, "exec-error")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(errOut, format, a...)
		return 127
	}
	syscall.CloseOnExec(execErrFd)

	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	cpu := fs.Int64("cpu", 0, "RLIMIT_CPU seconds")
	nproc := fs.Int64("nproc", 0, "RLIMIT_NPROC")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return fail("runbox-init: bad trampoline arguments %q", args)
	}
	argv := fs.Args()

	if *cpu > 0 {
		// SIGXCPU at the soft limit, SIGKILL a second later.
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: uint64(*cpu), Max: uint64(*cpu) + 1}); err != nil {
			return fail("runbox-init: RLIMIT_CPU: %v", err)
		}
	}
	if *nproc > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: uint64(*nproc), Max: uint64(*nproc)}); err != nil {
			return fail("runbox-init: RLIMIT_NPROC: %v", err)
		}
	}
	// Under memory pressure the kernel should pick the program, never
	// PID 1 (raising the score needs no privilege).
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)

	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail("%s: command not found in the box", argv[0])
	}
	// The thread that may hold the filter alone is the one that execs.
	runtime.LockOSThread()
	// Without the filter the program still runs: on Linux the signals
	// runbox-init ignores, SIGKILL and SIGSTOP never reach it anyway.
	_ = shieldPID1()
	err = syscall.Exec(path, argv, os.Environ())
	return fail("exec %s: %v", argv[0], err)
}
