package sandbox

import (
	"context"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Run runs one job in a fresh box, taken from the pool when one waits.
// It always returns a result: failures of the platform are results of
// kind sandbox, not errors.
func (r *BoxRunner) Run(ctx context.Context, req RunRequest) contract.Result {
	return r.admitted(ctx, req.Job, func() contract.Result { return r.run(ctx, req) })
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
	var mode callMode
	if req.OnSent != nil {
		mode.onSent = func(sent time.Time) {
			req.OnSent(Detached{RunID: job.RunID, BoxID: b.ID(), Isolation: r.d.Isolation(), Job: job, Sent: sent,
				StartupMs: startup, Pooled: pooled})
		}
	}
	o := r.exchange(ctx, b, job, streams, mode)
	if o.end == cancelled {
		return contract.Fail(job, contract.Cancelled())
	}
	res := r.result(ctx, job, o, r.m.Limits)
	if px != nil {
		withNetwork(&res, px.Records())
	}
	res.Metrics.StartupMs = startup
	res.Metrics.Pooled = pooled
	return res
}

// exchange opens a started box's channel and makes the run's one call
// over it, serving the streams the box opens with streams; the channel
// ends with the call.
func (r *BoxRunner) exchange(ctx context.Context, b Box, job contract.Job, streams *initproto.Streams, mode callMode) (o outcome) {
	sent := time.Now()
	conn, err := b.Exchange(ctx)
	if err == nil {
		var ch *channel
		if ch, err = firstChannel(conn, maxStream(r.m.Limits)); err == nil {
			return r.call(ctx, b, ch, job, r.callJob(job), r.m.Limits, streams, mode)
		}
		_ = conn.Close()
	}
	o.lost.why = "the box's channel could not be opened: " + AsEngineError(err).Msg
	b.Kill()
	return r.judge(ctx, b, o, sent)
}
