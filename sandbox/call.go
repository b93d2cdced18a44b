package sandbox

import (
	"context"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/stagetrace"
	"github.com/runbox-mcp/runbox/manifest"
)

// admitted runs call under one of the runner's slots: the admission of a
// one-off run and of a session's call alike. A call refused (the queue
// full) or cancelled while it waits answers at once.
func (r *BoxRunner) admitted(ctx context.Context, job contract.Job, call func() contract.Result) contract.Result {
	release, queueMs, refused := r.slots.take(ctx, job, r.m)
	if refused != nil {
		return *refused
	}
	r.active()
	defer r.active()
	defer release()
	res := call()
	res.Metrics.QueueMs = queueMs
	res.Isolation = r.d.Isolation()
	return res
}

// callJob is the job runbox-init is sent for job.
func (r *BoxRunner) callJob(job contract.Job) *initproto.Job {
	ij := initJob(r.m, job, r.d.Isolation())
	ij.CA = r.caPEM()
	return ij
}

// sessionCallJob is callJob for a session's cell (cellJob).
func (r *BoxRunner) sessionCallJob(job contract.Job) *initproto.Job {
	ij := cellJob(r.m, job, r.d.Isolation())
	ij.CA = r.caPEM()
	return ij
}

// callMode says how call exchanges a job with its box.
type callMode struct {
	// session: the box is a session's (call's doc).
	session bool
	// adopt: the job was sent at sent by a server since restarted: the
	// box is asked for the run's report by its id (a collect stream), and
	// the deadlines count from sent.
	adopt bool
	sent  time.Time
	// onSent is called just before the job is sent.
	onSent func(sent time.Time)
}

// call gives box b its job over ch and collects the outcome: the one
// exchange of a one-off run and of a session's cell. The box's streams are
// served by streams under lim's bounds, every cap applies, and past the
// deadline, or when the box breaks the protocol, it is killed. The two
// differ in what a cancellation does (a one-off box is killed; a session's
// cell is interrupted and its report awaited, session's bound), and in the
// channel afterwards: a one-off box's is closed, a session's kept while it
// is sound.
//
// A call in mode.adopt collects a job a server since restarted sent at
// mode.sent: its deadlines count from then.
func (r *BoxRunner) call(ctx context.Context, b Box, ch *channel, job contract.Job, ij *initproto.Job, lim manifest.Limits, streams *initproto.Streams, mode callMode) (o outcome) {
	session := mode.session
	o.program = kernelComm(ij.Argv)
	// A session's handlers end with the call, not with its cancellation:
	// a cancelled call interrupts the cell, which must meet the interrupt
	// where it is (in a tool call, say), not a tool call failed under it
	// a moment before.
	hctx := ctx
	if session {
		hctx = context.WithoutCancel(ctx)
	}
	tr := stagetrace.From(ctx)
	bs := ch.begin(hctx, lim, streams, session)
	bs.trace = tr
	unlist := r.peeks.add(job.RunID, ch, bs, lim)
	ij.Streams, ij.StreamBudgets, ij.Call = streams.Kinds(), budgets(streams), bs.call
	ij.RunID, ij.KeepMs = job.RunID, keepUncollected.Milliseconds()
	sent := time.Now()
	bound := job.Timeout + r.grace
	if mode.adopt {
		sent = mode.sent
		// A run over already still has its report collected.
		bound = max(time.Until(sent.Add(bound)), r.grace)
	} else if mode.onSent != nil {
		mode.onSent(sent)
	}
	// The box's answer is awaited here, on the handler's own goroutine:
	// the deadline and a cancellation act from timers (watch), with no
	// goroutine to start and wake for every call.
	w := r.watch(ctx, b, ch, bound, session)
	c := ch.run(bs, ij, r.grace, mode.adopt)
	if end := w.stop(); end != answered {
		o.endTo(end)
		if session {
			// A session's interrupted call goes on past its
			// cancellation.
			ctx = context.WithoutCancel(ctx)
		}
	}
	unlist()
	ch.finish(bs)
	o.report, o.contents = c.report, c.contents
	if o.report != nil {
		tr.Add(o.report.Trace...)
	}
	tr.Mark("host: call's streams released")
	switch {
	case !session && o.report != nil && c.violation == "":
		// Ending a one-off box's channel lets its runbox-init exit.
		ch.finished()
	case !session || o.report == nil || c.violation != "":
		// A session's call that came without its report leaves the
		// channel in no known state, and its next call opens another.
		ch.close()
	}
	if c.violation != "" {
		// A box that floods or lies on the channel is not believed.
		b.Kill()
		o.report, o.contents = nil, nil
		o.lost = loss{cause: lossViolation, why: "the box broke the channel protocol (" + c.violation + ") and was killed"}
		r.log.Warn("box broke the channel protocol", "run_id", job.RunID, "box", b.ID(), "why", c.violation)
		return o
	}
	switch {
	case o.report != nil:
		o.session = sessionState(session, o.report)
		// Asked only for the debug log: a platform may wait a moment for
		// the stderr of a box that lives on (oci: 100 ms a cell).
		if r.log.Enabled(ctx, slog.LevelDebug) {
			if d := ch.conn.Diag(); d != "" {
				r.log.Debug("runbox-init stderr", "run_id", job.RunID, "stderr", d)
			}
		}
	case c.unsent != nil:
		// The report came, its artifacts did not: not the call's answer,
		// though what it says of a session's state holds.
		o.session = sessionState(session, c.unsent)
		o.lost.why = "the box's report came without the artifacts it names: " + c.err.Error()
		r.log.Warn("box sent a report without its artifacts", "run_id", job.RunID, "box", b.ID(), "err", c.err)
	default:
		o.lost.why = "the box ended without a report"
		if c.err != nil {
			o.lost.why += ": " + c.err.Error()
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(ch.conn.Diag()), "\n"); first != "" {
			o.lost.why += " (runbox-init: " + first + ")"
		}
		if o.end != cancelled {
			r.log.Warn("box ended without a report", "run_id", job.RunID, "box", b.ID(), "err", c.err, "init_stderr", ch.conn.Diag())
		}
	}
	if o.end == cancelled {
		return o
	}
	return r.judge(ctx, b, o, sent)
}

// sessionState is what a session box's report says of its state: a box
// that answered lives on, unless it says its state is lost.
func sessionState(session bool, rep *initproto.Report) *initproto.SessionState {
	switch {
	case !session:
		return nil
	case rep.Session == nil:
		return &initproto.SessionState{}
	}
	return rep.Session
}

// result is the call's answer: its outcome classified, and the image's
// digest, asked after the run (a platform may learn it from the box).
func (r *BoxRunner) result(ctx context.Context, job contract.Job, o outcome, lim manifest.Limits) contract.Result {
	res := buildResult(job, o, lim)
	res.Image, _ = r.d.ImageDigest(context.WithoutCancel(ctx), job.Language.Image)
	return res
}

// judge asks the platform what only it knows: OOM when the box could not
// tell, the deadline, the box's loss, a forbidden call's name.
func (r *BoxRunner) judge(ctx context.Context, b Box, o outcome, sent time.Time) outcome {
	q := VerdictQuery{State: needsVerdict(o), Sent: sent}
	if o.report != nil && (seccompDeath(o.report) || o.report.Signal == sigSEGV) {
		// A SIGSEGV is asked about too: on a kernel without the 32-bit
		// ABI an int 0x80 faults rather than reaching the filter, and the
		// kernel log says so.
		q.Syscall = true
		if ms := o.report.EndedUnixMs; ms > 0 {
			q.Ended = time.UnixMilli(ms)
		}
		if o.report.Signal == sigSYS || o.report.Signal == sigSEGV {
			q.Comm = o.program
		} else {
			q.Comm = shellKilledComm(o.report.Stderr)
		}
	}
	if !q.State && !q.Syscall {
		return o
	}
	v := b.Verdict(context.WithoutCancel(ctx), q)
	o.oomKilled = v.OOMKilled
	o.syscall = v.Syscall
	switch {
	case v.Deadline && o.report == nil:
		o.endTo(backstopped)
	case v.Gone != "" && o.report == nil && o.end != backstopped:
		o.lost = loss{cause: lossGone, why: v.Gone}
	}
	if v.Err != nil && o.report == nil && !o.oomKilled && o.end != backstopped {
		o.lost.why = AsEngineError(v.Err).Msg
	}
	return o
}

// watcher ends a call whose box does not answer in time, from timers,
// while the call's goroutine waits for the answer: past its bound, or
// cancelled, the box is killed and, if its channel does not end within
// KillTimeout, the channel is cut; a session's cancelled call has its cell
// interrupted instead, and the bound starts again from then
// (sessionInterruptWait).
type watcher struct {
	mu   sync.Mutex
	over bool
	end  ending
	// backstop is the bound; cut, the channel's end after a kill.
	backstop, cut *time.Timer
	stopCtx       func() bool
}

// watch starts the watcher of a call over ch to box b, bounded by bound.
func (r *BoxRunner) watch(ctx context.Context, b Box, ch *channel, bound time.Duration, session bool) *watcher {
	w := &watcher{}
	kill := func(e ending) {
		w.end = max(w.end, e)
		if w.cut == nil {
			b.Kill()
			w.cut = time.AfterFunc(KillTimeout, ch.close)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.backstop = time.AfterFunc(bound, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.over {
			kill(backstopped)
		}
	})
	w.stopCtx = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case w.over || w.cut != nil:
		case !session:
			kill(cancelled)
		default:
			w.end = max(w.end, interrupted)
			ch.interrupt()
			w.backstop.Reset(sessionInterruptWait + r.grace)
		}
	})
	return w
}

// stop ends the watch once the call has its answer, and says how the
// host ended the call: answered when it did not.
func (w *watcher) stop() ending {
	w.stopCtx()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.over = true
	w.backstop.Stop()
	if w.cut != nil {
		w.cut.Stop()
	}
	return w.end
}

// needsVerdict says whether the platform must be asked about the box's
// end. The box reads its memory cgroup's oom_kill counter itself: when
// that is 0 and nothing died of an unexplained SIGKILL, asking again would
// only add round trips to every call. A session's box whose state lives
// on has not ended: a platform asked would wait for its end, then kill it.
//
// Where the box has no counter (gVisor: -1), a program that exited 0 of
// itself is not asked about either: an OOM kill the host's kernel made
// would have taken the whole sandbox and its report with it, and the
// answer costs the box's exit under runsc (~200-280 ms a call, the most
// of a warm gVisor call) plus an inspect and an events query.
func needsVerdict(o outcome) bool {
	if o.session != nil && o.session.Lost == "" && o.end != backstopped {
		return false
	}
	rep := o.report
	if rep == nil || o.end == backstopped || rep.OOMKills > 0 || (rep.Signal == sigKILL && !rep.TimedOut) {
		return true
	}
	return rep.OOMKills < 0 && !cleanExit(rep)
}

// cleanExit says whether the program ran and exited 0 of itself.
func cleanExit(rep *initproto.Report) bool {
	return rep.ExitCode == 0 && rep.Signal == 0 && !rep.TimedOut && !rep.CheckFailed &&
		rep.StartError == "" && rep.InitError == ""
}

// kernelComm is the name the kernel gives a process that runs argv: its
// executable's file name, cut to the 15 bytes of a task's comm.
func kernelComm(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := path.Base(argv[0])
	return name[:min(len(name), 15)]
}

// shellKilledComm is the kernel's name of the command a shell reports
// killed by the seccomp filter, from the shell's last "Bad system call"
// line ("main.sh: line 2:    12 Bad system call         unshare -U true"),
// or "" when the line names no single command (a pipeline, a subshell).
// Without it, a kill of another box of the same uid at the same moment
// could be taken for this one's when the kernel dropped this one's record
// (it rate-limits them).
func shellKilledComm(stderr []byte) string {
	const mark = "Bad system call"
	s := string(stderr)
	i := strings.LastIndex(s, mark)
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(s[i+len(mark):], "\n")
	line = strings.TrimPrefix(strings.TrimSpace(line), "(core dumped)")
	if strings.ContainsAny(line, "|&;()") {
		return ""
	}
	for _, word := range strings.Fields(line) {
		if name, _, ok := strings.Cut(word, "="); ok && isShellName(name) {
			continue // an assignment before the command
		}
		if strings.ContainsAny(word, "\"'\\$`{}*?[") {
			return ""
		}
		return kernelComm([]string{word})
	}
	return ""
}

// isShellName says whether s is a shell variable's name.
func isShellName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// seccompDeath says whether the program, or a command a shell script ran,
// was killed by the seccomp filter (SIGSYS). A shell reports its child's
// death as "Bad system call" and status 128+31.
func seccompDeath(rep *initproto.Report) bool {
	if rep.Signal == sigSYS {
		return true
	}
	return rep.ExitCode == 128+sigSYS && strings.Contains(string(rep.Stderr), "Bad system call")
}
