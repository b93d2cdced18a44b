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
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
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
	// Reaper, when set, is the reaper already waiting for Prestarted.
	Reaper *reaper
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

	prewarmThreads(spareThreads)

	// Bound before the program starts: nothing in the box can take the
	// name first.
	var rl *relay
	if len(args) > 1 && args[1] == initproto.RelayFlag {
		args = append([]string{args[0]}, args[2:]...)
		var err error
		if rl, err = listenRelay(initproto.RelaySocket); err != nil {
			fmt.Fprintln(os.Stderr, "runbox-init: no relay:", err)
		}
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
			if slices.Contains(pre.Env, "PYTHONPATH="+initproto.ToolsLib) {
				_ = writeLibraries(initproto.ToolsLib)
			}
			if self, err := os.Executable(); err == nil {
				opts.Self = self
				opts.Reaper = newReaper()
				opts.Prestarted, _ = start(opts.Reaper, self, pre.Argv, pre.Env, pre.Dir, pre.CPUSeconds, pre.NProc, true, nil, nil)
			}
		}
	}

	return serve(stdin, stdout, opts)
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

	r := opts.Reaper
	if r == nil {
		r = newReaper()
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
func runProcess(ctx context.Context, r *reaper, self string, job *initproto.Job, pre *process, live *liveOutput) runResult {
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
	exists := os.O_EXCL
	if replace {
		exists = os.O_TRUNC
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
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("creating directory for %s: %w", rel, err)
		}
		f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|exists|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		_, err = f.Write(data)
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

// process is a started program: its pipes and what reads them.
type process struct {
	pid            int
	pipes          *pipes
	stdout, stderr gate
	readers        sync.WaitGroup
	execErr        []byte
	execDone       chan struct{} // closed once execErr is read
	started        time.Time
	// ctl, for a prestarted interpreter, carries the code's path; it is
	// the child's descriptor ctlFd.
	ctl *os.File
}

// ctlFd is where a prestarted interpreter reads the code's path.
const ctlFd = 4

// gate passes writes on to its target once opened, and drops them before:
// a prestarted interpreter's output belongs to no job until one begins.
type gate struct {
	mu sync.Mutex
	w  io.Writer
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_, _ = g.w.Write(p)
	}
	return len(p), nil
}

func (g *gate) open(w io.Writer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.w = w
}

// start forks argv through the trampoline with the limits applied, and
// starts draining its output: into stdout and stderr from its first byte,
// or, when they are nil (a prestarted interpreter), into closed gates.
func start(r *reaper, self string, argv, env []string, dir string, cpu, nproc int64, withCtl bool, stdout, stderr io.Writer) (*process, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	pipes, err := newPipes()
	if err != nil {
		return nil, err
	}
	files := []uintptr{pipes.stdinR.Fd(), pipes.stdoutW.Fd(), pipes.stderrW.Fd(), pipes.execW.Fd()}
	p := &process{pipes: pipes}
	if stdout != nil {
		// Open before the fork: a program that prints and exits before
		// we look again must not lose a byte.
		p.stdout.open(stdout)
		p.stderr.open(stderr)
	}
	var ctlR *os.File
	if withCtl {
		if ctlR, p.ctl, err = os.Pipe(); err != nil {
			pipes.closeAll()
			return nil, err
		}
		files = append(files, ctlR.Fd())
	}
	args := append([]string{self, trampolineArg,
		"--cpu=" + strconv.FormatInt(cpu, 10),
		"--nproc=" + strconv.FormatInt(nproc, 10), "--"}, argv...)
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: files,
		// Its own process group, so that off PID 1 we can still kill
		// everything it started (see killAll).
		Sys: &syscall.SysProcAttr{Setpgid: true},
	}
	r.expect()
	p.started = time.Now()
	pid, err := syscall.ForkExec(self, args, attr)
	if ctlR != nil {
		_ = ctlR.Close()
	}
	if err != nil {
		pipes.closeAll()
		if p.ctl != nil {
			_ = p.ctl.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.pid = pid
	r.setMain(pid)
	pipes.closeChildEnds()
	p.readers.Add(3)
	go func() { defer p.readers.Done(); _, _ = io.Copy(&p.stdout, pipes.stdoutR) }()
	go func() { defer p.readers.Done(); _, _ = io.Copy(&p.stderr, pipes.stderrR) }()
	p.execDone = make(chan struct{})
	go func() {
		defer p.readers.Done()
		p.execErr, _ = io.ReadAll(io.LimitReader(pipes.execR, 4096))
		close(p.execDone)
	}()
	return p, nil
}

// startError is what the trampoline said of a failed exec: "" when the
// exec succeeded, or while that is not known yet.
func (p *process) startError() string {
	select {
	case <-p.execDone:
		return string(p.execErr)
	default:
		return ""
	}
}

// alive says whether the process has not exited yet.
func (p *process) alive(r *reaper) bool {
	return !isClosed(r.mainDone)
}

// supervise feeds stdin, enforces the deadline, and returns once the
// program and everything it started are gone; its output goes to res's
// captures (already open for a program started for this job), which live,
// if set, shows to a peek.
func (p *process) supervise(ctx context.Context, r *reaper, job *initproto.Job, res runResult, stdin []byte, timeout time.Duration, live *liveOutput) runResult {
	defer p.pipes.closeAll()
	live.set(res.stdout, res.stderr)
	p.stdout.open(res.stdout)
	p.stderr.open(res.stderr)
	if p.ctl != nil {
		// A prestarted interpreter: the code starts when it reads its
		// path, so only now, with the output already going to this job
		// (sent before the gates opened, a quick print was lost).
		_, _ = p.ctl.WriteString(job.CodePath + "\n")
		_ = p.ctl.Close()
	}
	go func() {
		// A program that never reads its stdin must not block us: this
		// goroutine ends with EPIPE once the program is gone.
		_, _ = p.pipes.stdinW.Write(stdin)
		_ = p.pipes.stdinW.Close()
	}()
	begun := time.Now()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-r.mainDone:
	case <-timer.C:
		res.timedOut = true
		killAll(p.pid)
		<-r.mainDone
	case <-ctx.Done():
		killAll(p.pid)
		<-r.mainDone
	}
	res.ended = time.Now()
	res.wall = res.ended.Sub(begun)
	res.setStatus(r.mainStatus)
	// Whatever the program left running dies with it: nothing persists,
	// and the output pipes close.
	killAll(p.pid)
	r.waitNoChildren(drainTimeout)
	waitTimeout(&p.readers, drainTimeout)
	if len(p.execErr) > 0 {
		res.startErr = string(p.execErr)
	}
	return res
}

// run starts argv and supervises it.
func run(ctx context.Context, r *reaper, self string, job *initproto.Job, argv []string, stdin []byte, timeout time.Duration, live *liveOutput) runResult {
	res := newRunResult(job)
	p, err := start(r, self, argv, job.Env, job.Dir, job.CPUSeconds, job.NProc, false, res.stdout, res.stderr)
	if err != nil {
		res.startErr = err.Error()
		return res
	}
	return p.supervise(ctx, r, job, res, stdin, timeout, live)
}

// killAll kills every process the program started. As PID 1, kill(-1)
// reaches all of them wherever they moved; elsewhere (tests) the process
// group must do.
func killAll(pid int) {
	if os.Getpid() == 1 {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

type pipes struct {
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW, execR, execW *os.File
}

func newPipes() (*pipes, error) {
	p := &pipes{}
	for _, pair := range []struct{ r, w **os.File }{{&p.stdinR, &p.stdinW}, {&p.stdoutR, &p.stdoutW}, {&p.stderrR, &p.stderrW}, {&p.execR, &p.execW}} {
		r, w, err := os.Pipe()
		if err != nil {
			p.closeAll()
			return nil, fmt.Errorf("creating pipe: %w", err)
		}
		*pair.r, *pair.w = r, w
	}
	return p, nil
}

func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.stdinR, p.stdoutW, p.stderrW, p.execW} {
		_ = f.Close()
	}
}

func (p *pipes) closeAll() {
	for _, f := range []*os.File{p.stdinR, p.stdinW, p.stdoutR, p.stdoutW, p.stderrR, p.stderrW, p.execR, p.execW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// reaper waits for every child, as PID 1 must, and picks out the main one.
type reaper struct {
	sigs     chan os.Signal
	quit     chan struct{}
	mu       sync.Mutex
	mainPid  int
	pending  map[int]syscall.WaitStatus // exited before setMain saw the pid
	mainDone chan struct{}
	// mainStatus is written before mainDone is closed.
	mainStatus syscall.WaitStatus
	noChildren chan struct{}
}

func newReaper() *reaper {
	r := &reaper{sigs: make(chan os.Signal, 8), quit: make(chan struct{}), pending: map[int]syscall.WaitStatus{}}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return r
}

func (r *reaper) stop() {
	signal.Stop(r.sigs)
	close(r.quit)
}

// expect arms the reaper for a new main process.
func (r *reaper) expect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mainPid = 0
	r.mainDone = make(chan struct{})
	r.noChildren = make(chan struct{})
}

func (r *reaper) setMain(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mainPid = pid
	if st, ok := r.pending[pid]; ok {
		delete(r.pending, pid)
		r.mainStatus = st
		close(r.mainDone)
	}
	select {
	case r.sigs <- syscall.SIGCHLD: // reap anything that raced us
	default:
	}
}

func (r *reaper) loop() {
	for {
		select {
		case <-r.quit:
			return
		case <-r.sigs:
		}
		r.reapAll()
	}
}

func (r *reaper) reapAll() {
	for {
		var st syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &st, syscall.WNOHANG, nil)
		r.mu.Lock()
		switch {
		case errors.Is(err, syscall.EINTR):
			r.mu.Unlock()
			continue
		case err != nil: // ECHILD: nobody left
			if r.mainDone != nil && isClosed(r.mainDone) && !isClosed(r.noChildren) {
				close(r.noChildren)
			}
			r.mu.Unlock()
			return
		case pid == 0:
			r.mu.Unlock()
			return
		}
		switch {
		case pid == r.mainPid && r.mainPid != 0:
			r.mainStatus = st
			close(r.mainDone)
			r.mainPid = 0
		case r.mainPid == 0 && r.mainDone != nil && !isClosed(r.mainDone):
			r.pending[pid] = st
		}
		r.mu.Unlock()
	}
}

// waitNoChildren waits until every child has been reaped, or d passes.
func (r *reaper) waitNoChildren(d time.Duration) {
	deadline := time.After(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.noChildren:
			return
		case <-deadline:
			return
		case <-tick.C:
			// A SIGCHLD can coalesce with one already handled; ask again.
			select {
			case r.sigs <- syscall.SIGCHLD:
			default:
			}
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
