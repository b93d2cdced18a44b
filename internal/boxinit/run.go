//go:build linux

package boxinit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/pollfd"
)

// checkTimeout bounds a syntax check (bash -n is instant on sane input).
const checkTimeout = 10 * time.Second

// drainTimeout bounds the wait for killed processes and closed pipes.
const drainTimeout = 2 * time.Second

// Options adapt the init to where it runs; the zero value is for a box.
type Options struct {
	// Self is the path of this binary, for the trampoline; default
	// os.Executable.
	Self string
	// CgroupRoot is where the box's cgroup files are; default
	// /sys/fs/cgroup. Missing files make the figures unknown, not errors.
	CgroupRoot string
	// Scratch lists writable mounts to check for exhaustion; default
	// the job's Dir and /tmp.
	Scratch []string
	// ChildReaper, when set, is the child reaper already waiting for
	// Prestarted.
	ChildReaper *childReaper
	// Prestarted is an interpreter started before the job arrived, waiting
	// for the code's path; nil runs the job's own command.
	Prestarted *process
	// Host opens streams to the server during the run (services.go).
	Host *Host
	// Services run beside the program; Main runs services().
	Services []Service
	// Live, when set, is where a peek finds the program's output so far
	// (peek.go).
	Live *liveOutput
	// Relay, when set, serves the box's channels once stdin has ended
	// (relay.go).
	Relay *relay

	// stages, when set, notes the call's stage times (a traced job).
	stages *stages
}

// Main is runbox-init's entry point; it returns the process exit code.
func Main(args []string, stdin io.Reader, stdout io.Writer) int {
	if len(args) > 1 && args[1] == trampolineArg {
		return trampoline(args[2:])
	}
	if len(args) == 3 && args[1] == InstallArg {
		return install(args[2])
	}
	if len(args) == 2 && args[1] == initproto.UnplugArg {
		return unplugMain()
	}
	if len(args) == 2 && args[1] == initproto.RelayArg {
		return relayMain(stdin, stdout, initproto.RelaySocket)
	}
	// Nothing in the box may read our memory or descriptors (the result
	// channel): non-dumpable makes /proc/1/{fd,mem} root-only and refuses
	// ptrace from the same uid.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Code in the box must not be able to end us with a signal.
	if err := ignoreSignals(); err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: ignoring signals:", err)
	}

	args, relayed := withoutRelayFlag(args)
	if !restorable(args) {
		oneProcIn(cgroupFiles("/sys/fs/cgroup"))
		// The channel's way in, read parked: with one P (oneProcIn), a
		// read blocked in the kernel holds the P until the runtime's
		// monitor takes it back, tens of microseconds on, and the
		// goroutine each message readies (the cell that reads the job)
		// waits that long.
		stdin = pollfd.Pollable(stdin)
	}
	prewarmThreads(spareThreads)

	// Bound before the program starts: nothing in the box can take the
	// name first.
	var rl *relay
	if relayed {
		var err error
		if rl, err = listenRelay(initproto.RelaySocket, fromRoot); err != nil {
			fmt.Fprintln(os.Stderr, "runbox-init: no relay:", err)
		}
	}
	// Before any interpreter starts: Python's sitecustomize and Node's
	// preload are found there.
	if err := writeDisplayLibraries(); err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: no display libraries:", err)
	}
	if len(args) > 2 && args[1] == initproto.SessionFlag {
		return mainSession(args[2], stdin, stdout, rl)
	}
	opts := Options{Services: services(), Relay: rl}
	if len(args) > 2 && args[1] == initproto.PrestartFlag {
		// A pooled box: start the interpreter now, while the job is
		// still on its way.
		if pre, err := initproto.DecodePrestart(args[2]); err == nil {
			// Before the interpreter starts: its import path must see
			// the tool-call libraries when the server has tools to call.
			if onPythonPath(pre.Env, initproto.ToolsLib) {
				_ = writeLibraries(initproto.ToolsLib)
			}
			if self, err := os.Executable(); err == nil {
				opts.Self = self
				opts.ChildReaper = newChildReaper()
				opts.Prestarted, _ = start(opts.ChildReaper, self, pre.Argv, pre.Env, pre.Dir, pre.CPUSeconds, pre.NProc, true, nil, nil)
			}
		}
	}

	return serve(stdin, stdout, opts)
}

// withoutRelayFlag is args without a leading RelayFlag, and whether
// there was one (a box that listens on its relay).
func withoutRelayFlag(args []string) ([]string, bool) {
	if len(args) > 1 && args[1] == initproto.RelayFlag {
		return append([]string{args[0]}, args[2:]...), true
	}
	return args, false
}

// restorable says whether this is a session box that may be checkpointed
// and restored with its memory (gVisor), whose stdin must stay as the
// runtime gave it (initproto.Session.Restorable): no poller, and so not one
// P either, since a read blocked in the kernel would hold the only one.
func restorable(args []string) bool {
	if len(args) < 3 || args[1] != initproto.SessionFlag {
		return false
	}
	spec, err := initproto.DecodeSession(args[2])
	return err == nil && spec.Restorable
}

// oneProcIn runs Go code on one thread at a time in a box of one CPU or
// less (the default limit), where Go's own default is two: runbox-init's
// goroutines hand a cell's messages on to each other, and with a second P
// the runtime wakes and spins another thread for each hand-off, CPU taken
// from the box's quota and the host's cores for no time saved.
func oneProcIn(cg cgroupFiles) {
	if l := cg.cpuLimit(); l > 0 && l <= 1 {
		runtime.GOMAXPROCS(1)
	}
}

// spareThreads is how many OS threads runbox-init makes before the program
// runs. The program shares the box's pids limit with us: once it has used
// every pid, a Go runtime that needs one more thread dies ("failed to
// create new OS thread"), and the run would end without a report.
const spareThreads = 12

// prewarmThreads makes the runtime start n threads now and keep them idle:
// a goroutine locked to its thread and parked forces the runtime to start
// another thread for the next one; unlocked, the threads stay for reuse.
func prewarmThreads(n int) {
	var ready sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		ready.Add(1)
		go func() {
			runtime.LockOSThread()
			ready.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	close(release)
}

// Run runs one job and returns the report and the content of each sent
// artifact, in the report's order: the call algorithm (call) with the
// program run as a process of its own.
func Run(ctx context.Context, job *initproto.Job, opts Options) (*initproto.Report, [][]byte) {
	opts, err := opts.withDefaults(job.Dir)
	if err != nil {
		return &initproto.Report{InitError: "finding own binary: " + err.Error()}, nil
	}
	// Orphans of the program must be reaped by us even when we are not
	// PID 1 (tests on the host).
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	r := opts.ChildReaper
	if r == nil {
		r = newChildReaper()
	}
	defer r.stop()
	pre := opts.Prestarted
	if pre != nil && (len(job.Check) > 0 || !pre.alive(r)) {
		// Not usable (a check must run first, or it died while waiting):
		// the job's own command runs instead, as in a cold box.
		killAll(pre.pid)
		r.waitNoChildren(drainTimeout)
		pre.pipes.closeAll()
		_ = pre.ctl.Close()
		pre = nil
	}
	prog := program{run: func(ctx context.Context, job *initproto.Job) runResult {
		return runProcess(ctx, r, opts.Self, job, pre, opts.Live)
	}}
	if pre != nil {
		prog.pid = pre.pid
	}
	return call(ctx, job, opts, prog)
}

// runProcess runs a one-off job's program: the syntax check first, if the
// job has one, and then the program, started now or prestarted (pre),
// whose output live shows to a peek.
func runProcess(ctx context.Context, r *childReaper, self string, job *initproto.Job, pre *process, live *liveOutput) runResult {
	timeout := time.Duration(job.TimeoutMs) * time.Millisecond
	if len(job.Check) > 0 {
		check := run(ctx, r, self, job, job.Check, nil, min(checkTimeout, timeout), nil)
		if check.startErr == "" && !check.timedOut && check.signal == 0 && check.exitCode != 0 {
			return runResult{checkFailed: true, exitCode: check.exitCode,
				stdout: newCapture(job.MaxOutputBytes), stderr: check.stderr}
		}
	}
	if pre != nil {
		return pre.supervise(ctx, r, job, newRunResult(job), job.Stdin, timeout, live)
	}
	return run(ctx, r, self, job, job.Argv, job.Stdin, timeout, live)
}

// unpack writes the input files and the code into the workspace and returns
// their hashes, so that unchanged inputs are not reported as artifacts. A
// file already there is refused, or replaced (never through a link).
func unpack(job *initproto.Job, replace bool) (map[string]string, error) {
	// A file already there is overwritten in place and then cut to its
	// new length, not opened with O_TRUNC: on the workspace's tmpfs that
	// frees its pages for the write to take new ones, most often as many
	// (a session's code file, call after call).
	exists := os.O_EXCL
	if replace {
		exists = 0
	}
	if job.Dir == "" || !filepath.IsAbs(job.Dir) {
		return nil, fmt.Errorf("job dir %q is not absolute", job.Dir)
	}
	inputs := make(map[string]string, len(job.Files)+1)
	write := func(rel string, data []byte) error {
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("input path %q is not inside the workspace", rel)
		}
		full := filepath.Join(job.Dir, rel)
		flags := os.O_WRONLY | os.O_CREATE | exists | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		var f *os.File
		// Opened outside Go's poller, which takes no regular file: its
		// try in os.OpenFile costs four fcntl and an epoll_ctl a file, on
		// every call of a session. The directory is made only when that
		// open fails, and then the open is os.OpenFile's, as before.
		if fd, err := syscall.Open(full, flags, 0o644); err == nil {
			f = os.NewFile(uintptr(fd), full)
		} else {
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return fmt.Errorf("creating directory for %s: %w", rel, err)
			}
			if f, err = os.OpenFile(full, flags, 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", rel, err)
			}
		}
		_, err := f.Write(data)
		if err == nil && replace {
			err = f.Truncate(int64(len(data)))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		inputs[filepath.ToSlash(rel)] = sha256hex(data)
		return nil
	}
	for _, f := range job.Files {
		if err := write(filepath.FromSlash(f.Path), f.Data); err != nil {
			return nil, err
		}
	}
	rel, err := filepath.Rel(job.Dir, job.CodePath)
	if err != nil {
		return nil, fmt.Errorf("code path %q: %w", job.CodePath, err)
	}
	if err := write(rel, job.Code); err != nil {
		return nil, err
	}
	return inputs, nil
}

// noSpace is the report of a call whose code or files did not fit in the
// workspace (a session's earlier cell may have filled it): the program's
// disk limit, not runbox-init's failure; nil for any other error.
func noSpace(job *initproto.Job, err error) *initproto.Report {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return nil
	}
	return &initproto.Report{
		OOMKills: -1,
		ExitCode: 1,
		Stdout:   []byte{},
		Stderr:   []byte("runbox-init: " + err.Error() + " (the workspace is full: free space in it, or in a new session)\n"),
		DiskFull: job.Dir,
	}
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
