//go:build linux

package boxinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

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
func start(r *childReaper, self string, argv, env []string, dir string, cpu, nproc int64, withCtl bool, stdout, stderr io.Writer) (*process, error) {
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
func (p *process) alive(r *childReaper) bool {
	return !isClosed(r.mainDone)
}

// supervise feeds stdin, enforces the deadline, and returns once the
// program and everything it started are gone; its output goes to res's
// captures (already open for a program started for this job), which live,
// if set, shows to a peek.
func (p *process) supervise(ctx context.Context, r *childReaper, job *initproto.Job, res runResult, stdin []byte, timeout time.Duration, live *liveOutput) runResult {
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
func run(ctx context.Context, r *childReaper, self string, job *initproto.Job, argv []string, stdin []byte, timeout time.Duration, live *liveOutput) runResult {
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
