package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/runbox-mcp/runbox/sandbox"
)

const (
	// exitGrace is how long Remove waits for a box that had its channel
	// to exit of itself (runbox-init does once its stdin ends).
	exitGrace = 2 * time.Second
	// pooledCPUShares is a pooled box's CPU weight until a job takes it,
	// claimedCPUShares a cold box's (the Docker driver's weight.go).
	pooledCPUShares  = 2
	claimedCPUShares = 1024
)

// box is a box run by `runc run` in the foreground: runc's stdin and
// stdout are runbox-init's, passed through.
type box struct {
	o      *OCI
	id     string
	bundle string
	cmd    *exec.Cmd
	// in and out are the server's ends of the channel.
	in      *os.File
	out     *os.File
	diag    *sandbox.Capped
	drained chan struct{} // closed once stderr has ended
	// exited is closed once runc ended (the box's end).
	exited  chan struct{}
	started time.Time
	// exchanged: the channel was handed out (once: its pipes are the
	// box's only channel).
	exchanged atomic.Bool
	lowWeight bool
	// attached: the box is another runc's (a box found again, Attach),
	// reached through its relay; cmd is the relay's runc exec.
	attached bool
	removed  sync.Once
}

var (
	_ sandbox.Box     = (*box)(nil)
	_ sandbox.Claimer = (*box)(nil)
)

// run writes the bundle and starts runc; it returns once runc runs (the
// box may still fail to start: its end and runc's words come on the
// channel's end and Diag).
func (b *box) run(s *specs.Spec) error {
	return b.launch(s, func() *exec.Cmd {
		run := []string{"run", "--keep"}
		if b.o.gvisor() {
			// runsc has no --keep: the sandbox's end is its own.
			run = []string{"run"}
		}
		return exec.Command(b.o.runc, b.o.rt(append(run, "--bundle", b.bundle, "--pid-file", filepath.Join(b.bundle, "pid"), b.id)...)...)
	})
}

// launch writes the bundle and starts the runtime's command on it (run,
// or restore).
func (b *box) launch(s *specs.Spec, cmd func() *exec.Cmd) error {
	if err := os.Mkdir(b.bundle, 0o700); err != nil {
		return err
	}
	cfg, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.bundle, "config.json"), cfg, 0o600); err != nil {
		return err
	}
	// --keep: the box stays in runc's state after its end, its cgroup
	// with it, until Remove; Verdict reads its OOM count there.
	return b.start(cmd())
}

// start starts cmd (runc run, or runc exec of the box's relay) with pipes
// for its stdin, stdout and stderr, which runc hands the box's process as
// they are: the server keeps the other ends.
func (b *box) start(cmd *exec.Cmd) error {
	var files [6]*os.File // in r/w, out r/w, err r/w
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return err
		}
		files[i], files[i+1] = r, w
	}
	b.cmd = cmd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[3], files[5]
	// A group of its own: a terminal's ^C to the server is not runc's
	// (which would pass it on to the box).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Start()
	// The box holds its ends now; ours would keep its channel open.
	files[0].Close()
	files[3].Close()
	files[5].Close()
	if err != nil {
		files[1].Close()
		files[2].Close()
		files[4].Close()
		return err
	}
	b.started = time.Now()
	b.in, b.out = files[1], files[2]
	b.drained = make(chan struct{})
	go func() {
		_, _ = io.Copy(b.diag, files[4])
		files[4].Close()
		close(b.drained)
	}()
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	return nil
}

func (b *box) ID() string         { return b.id }
func (b *box) Started() time.Time { return b.started }

// errSpent: a box's channel is its pipes, handed out once.
var errSpent = errors.New("this box's channel was already handed out (the oci backend has one per box)")

// Exchange returns the box's channel: runbox-init's stdout and stdin.
func (b *box) Exchange(context.Context) (sandbox.Conn, error) {
	if b.exchanged.Swap(true) {
		return nil, errSpent
	}
	return &conn{b: b}, nil
}

// conn is a box's pipes as its channel.
type conn struct {
	b      *box
	closed sync.Once
}

func (c *conn) Read(p []byte) (int, error)  { return c.b.out.Read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.b.in.Write(p) }

// Diag is runbox-init's stderr (and runc's), once it has ended or after
// a moment: a box that died says why there.
func (c *conn) Diag() string {
	select {
	case <-c.b.drained:
	case <-time.After(100 * time.Millisecond):
	}
	return c.b.diag.String()
}

// Close ends the channel: runbox-init sees its stdin end.
func (c *conn) Close() error {
	c.closed.Do(func() {
		_ = c.b.in.Close()
		_ = c.b.out.Close()
	})
	return nil
}

// Kill stops the box at once: SIGKILL to its first process ends every
// process of its PID namespace.
func (b *box) Kill() {
	if !b.Alive() {
		return
	}
	// Our runc waits for its child, so the pid is the box's until runc
	// ends.
	if pid := b.pid(); pid > 0 && !b.attached {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sandbox.KillTimeout)
	defer cancel()
	_ = exec.CommandContext(ctx, b.o.runc, b.o.rt("kill", b.id, "KILL")...).Run()
}

// pid is the box's first process, from runc's pid file; 0 before runc
// wrote it.
func (b *box) pid() int {
	raw, err := os.ReadFile(filepath.Join(b.bundle, "pid"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return n
}

// Alive says whether the box has not ended.
func (b *box) Alive() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Verdict names a forbidden call from the kernel log, and reads the box's
// end from its memory cgroup, which runc keeps until Remove.
func (b *box) Verdict(ctx context.Context, q sandbox.VerdictQuery) sandbox.Verdict {
	var v sandbox.Verdict
	if q.Syscall {
		uid, _, _ := ids(b.o.m.User)
		v.Syscall = b.o.kernelLog.Syscall(q.Sent, q.Ended, int(uid), q.Comm, 200*time.Millisecond)
	}
	if !q.State {
		return v
	}
	select {
	case <-b.exited:
	case <-time.After(sandbox.KillTimeout):
		b.Kill()
	case <-ctx.Done():
	}
	v.OOMKilled = oomKills(b.id) > 0 || b.o.kernelLog.OOMKilled(b.id, 100*time.Millisecond)
	return v
}

// oomKills is how many processes the box's memory cgroup killed: the
// oom_kill count of cgroup v1's memory.oom_control, or v2's
// memory.events; 0 when unreadable.
func oomKills(id string) int {
	for _, f := range []string{
		filepath.Join("/sys/fs/cgroup/memory", cgroupParent, id, "memory.oom_control"),
		filepath.Join("/sys/fs/cgroup", cgroupParent, id, "memory.events"),
	} {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range bytes.Lines(raw) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "oom_kill "); ok {
				k, _ := strconv.Atoi(n)
				return k
			}
		}
	}
	return 0
}

// Claim gives a pooled box a cold box's CPU weight, in its cgroup.
func (b *box) Claim(context.Context) error {
	if !b.lowWeight {
		return nil
	}
	v1 := filepath.Join("/sys/fs/cgroup/cpu", cgroupParent, b.id, "cpu.shares")
	if err := os.WriteFile(v1, []byte(strconv.Itoa(claimedCPUShares)), 0); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// cgroup v2: runc's conversion of shares to a weight.
	weight := 1 + ((claimedCPUShares-2)*9999)/262142
	return os.WriteFile(filepath.Join("/sys/fs/cgroup", cgroupParent, b.id, "cpu.weight"), []byte(strconv.Itoa(weight)), 0)
}

// Remove ends the channel and deletes the box. A box that had its channel
// is given a moment to exit of itself first; one that does not is
// killed. What fails, the reaper retries.
func (b *box) Remove() {
	b.removed.Do(func() {
		if b.in != nil {
			_ = b.in.Close()
			_ = b.out.Close()
		}
		if b.cmd != nil && b.cmd.Process != nil {
			if b.exchanged.Load() {
				select {
				case <-b.exited:
				case <-time.After(exitGrace):
				}
			}
			if b.Alive() {
				b.Kill()
				select {
				case <-b.exited:
				case <-time.After(sandbox.KillTimeout):
					_ = b.cmd.Process.Kill()
				}
			}
		}
		o := b.o
		if err := o.delete(b.id); err != nil {
			o.log.Warn("removing box failed; the reaper will retry", "box", b.id, "err", err)
			o.mu.Lock()
			o.unremoved[b.id] = true
			o.mu.Unlock()
		}
		o.mu.Lock()
		delete(o.live, b.id)
		o.mu.Unlock()
	})
}

func (b *box) String() string { return fmt.Sprintf("oci box %s", b.id) }
