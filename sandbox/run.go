package sandbox

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Run runs one job in a fresh box, taken from the pool when one waits.
// It always returns a result: failures of the platform are results of
// kind sandbox, not errors.
func (r *BoxRunner) Run(ctx context.Context, req RunRequest) contract.Result {
	job := req.Job
	release, queueMs, refused := r.slots.take(ctx, job, r.m)
	if refused != nil {
		return *refused
	}
	r.active()
	defer r.active()
	defer release()
	res := r.run(ctx, req)
	res.Metrics.QueueMs = queueMs
	res.Isolation = r.d.Isolation()
	return res
}

func (r *BoxRunner) run(ctx context.Context, req RunRequest) contract.Result {
	job := req.Job
	if err := r.d.Ready(ctx); err != nil {
		return engineFail(job, err)
	}
	if _, err := r.d.ImageDigest(ctx, job.Language.Image); err != nil {
		return engineFail(job, err)
	}
	t0 := time.Now()
	var b Box
	pooled := len(req.Mounts) == 0
	if pooled {
		b = r.pool.take(job.Language.Name)
	}
	if b != nil {
		r.claim(b)
	} else {
		pooled = false
		var err error
		b, err = r.start(ctx, BoxSpec{Language: job.Language, Lifetime: job.Timeout + backstopGrace, Mounts: req.Mounts,
			Labels: r.owner.Labels(map[string]string{LabelRunID: job.RunID, LabelLanguage: job.Language.Name})})
		if err != nil {
			if ctx.Err() != nil {
				return contract.Fail(job, contract.Cancelled())
			}
			return engineFail(job, err)
		}
	}
	r.pool.kick()
	// The answer need not wait for the removal: the box is done.
	defer r.remove(b)
	startup := time.Since(t0).Milliseconds()
	streams, px := r.withProxy(req)
	o := r.exchange(ctx, b, job, streams)
	if o.cancelled {
		return contract.Fail(job, contract.Cancelled())
	}
	res := buildResult(r.m, job, o)
	if px != nil {
		withNetwork(&res, px.Records())
	}
	res.Metrics.StartupMs = startup
	res.Metrics.Pooled = pooled
	// Asked after the run: a platform may learn the digest from the box.
	res.Image, _ = r.d.ImageDigest(ctx, job.Language.Image)
	return res
}

// exchange gives a started box its job over its channel, serving the
// streams the box opens with streams, and collects the outcome; past the
// deadline, on cancellation or when the box breaks the protocol, the box
// is killed.
func (r *BoxRunner) exchange(ctx context.Context, b Box, job contract.Job, streams *initproto.Streams) (o outcome) {
	sent := time.Now()
	conn, err := b.Exchange(ctx)
	if err != nil {
		o.lost = "the box's channel could not be opened: " + AsEngineError(err).Msg
		b.Kill()
		return r.judge(ctx, b, o, sent)
	}
	ch := newChannel(ctx, conn, r.m.Limits, r.grace, streams)
	got := make(chan collected, 1)
	ij := initJob(r.m, job, r.d.Isolation())
	ij.Streams, ij.StreamBudgets = streams.Kinds(), budgets(streams)
	o.program = kernelComm(ij.Argv)
	ij.CA = r.caPEM()
	go func() { got <- ch.run(ij) }()

	backstop := time.NewTimer(job.Timeout + r.grace)
	defer backstop.Stop()
	var c collected
	select {
	case c = <-got:
	case <-backstop.C:
		o.backstop = true
		c = r.killAndCollect(b, ch, got)
	case <-ctx.Done():
		o.cancelled = true
		c = r.killAndCollect(b, ch, got)
	}
	// Ending the session lets runbox-init exit.
	ch.close()
	o.report, o.contents = c.report, c.contents
	if c.violation != "" {
		// A box that floods or lies on the channel is not believed.
		b.Kill()
		o.report, o.contents = nil, nil
		o.lost = "the box broke the channel protocol (" + c.violation + ") and was killed"
		r.log.Warn("box broke the channel protocol", "run_id", job.RunID, "box", b.ID(), "why", c.violation)
		return o
	}
	if o.report == nil {
		o.lost = "the box ended without a report"
		if c.err != nil {
			o.lost += ": " + c.err.Error()
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(conn.Diag()), "\n"); first != "" {
			o.lost += " (runbox-init: " + first + ")"
		}
		if !o.cancelled {
			r.log.Warn("box ended without a report", "run_id", job.RunID, "box", b.ID(), "err", c.err, "init_stderr", conn.Diag())
		}
	} else if d := conn.Diag(); d != "" {
		r.log.Debug("runbox-init stderr", "run_id", job.RunID, "stderr", d)
	}
	if o.cancelled {
		return o
	}
	return r.judge(ctx, b, o, sent)
}

// judge asks the platform what only it knows: OOM when the box could not
// tell, the deadline, the box's loss, a forbidden call's name.
func (r *BoxRunner) judge(ctx context.Context, b Box, o outcome, sent time.Time) outcome {
	q := VerdictQuery{State: needsVerdict(o), Sent: sent}
	if o.report != nil && seccompDeath(o.report) {
		q.Syscall = true
		if ms := o.report.EndedUnixMs; ms > 0 {
			q.Ended = time.UnixMilli(ms)
		}
		if o.report.Signal == sigSYS {
			q.Comm = o.program
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
		o.backstop = true
	case v.Gone != "" && o.report == nil && !o.backstop:
		o.lost, o.gone = v.Gone, true
	}
	if v.Err != nil && o.report == nil && !o.oomKilled && !o.backstop {
		o.lost = AsEngineError(v.Err).Msg
	}
	return o
}

// killAndCollect kills the box and waits for its channel to end; a
// platform that does not end it in time has the channel cut under it.
func (r *BoxRunner) killAndCollect(b Box, ch *channel, got <-chan collected) collected {
	b.Kill()
	select {
	case c := <-got:
		return c
	case <-time.After(KillTimeout):
		ch.close()
		return <-got
	}
}

// needsVerdict says whether the platform must be asked about the box's
// end. The box reads its memory cgroup's oom_kill counter itself: when
// that is 0 and nothing died of an unexplained SIGKILL, asking again would
// only add round trips to every call.
func needsVerdict(o outcome) bool {
	rep := o.report
	return rep == nil || rep.OOMKills != 0 || o.backstop ||
		(rep.Signal == sigKILL && !rep.TimedOut)
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

// seccompDeath says whether the program, or a command a shell script ran,
// was killed by the seccomp filter (SIGSYS). A shell reports its child's
// death as "Bad system call" and status 128+31.
func seccompDeath(rep *initproto.Report) bool {
	if rep.Signal == sigSYS {
		return true
	}
	return rep.ExitCode == 128+sigSYS && strings.Contains(string(rep.Stderr), "Bad system call")
}
