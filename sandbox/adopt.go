package sandbox

import (
	"context"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Detached is what a server needs to find a run's box again after it was
// restarted: plain data (JSON), kept by the caller in its own store.
// [RunRequest].OnSent hands it over as the job leaves for its box;
// [Runner].Adopt takes it back.
type Detached struct {
	RunID string `json:"run_id"`
	BoxID string `json:"box_id"`
	// Isolation is the driver's Isolation(): a record of another backend
	// is not adopted.
	Isolation string `json:"isolation"`
	// Session is the session id, for a session's cell; Client the client
	// that owns the session ([SessionRequest].Client).
	Session string `json:"session,omitempty"`
	Client  string `json:"client,omitempty"`
	// Job is what classification needs (files' contents may be dropped).
	Job  contract.Job `json:"job"`
	Sent time.Time    `json:"sent"`
	// StartupMs and Pooled are the run's metrics the box does not know.
	StartupMs int64 `json:"startup_ms,omitempty"`
	Pooled    bool  `json:"pooled,omitempty"`
}

// keepUncollected is how long a one-off box keeps a report no server
// collected (its server died) before it exits (initproto.Job.KeepMs).
const keepUncollected = initproto.DefaultKeep

// MarkKept marks boxID as holding a run the caller's store keeps, when the
// driver can ([Driver].MarkKept); the mark is made in the background,
// bounded by the driver's own API deadline.
func (r *BoxRunner) MarkKept(boxID string) {
	if boxID == "" {
		return
	}
	go func() {
		if err := r.d.MarkKept(context.Background(), boxID); err != nil {
			r.log.Warn("marking a kept run's box failed: a server of another state directory may reap it once this one is gone", "box", boxID, "err", err)
		}
	}()
}

// Adopt finds d's box again (this server was restarted), waits for the
// run's end and returns the result the dead server would have built,
// through the same exchange and classification as a live run. The wait is
// bounded by the job's timeout from d.Sent plus the backstop grace, past
// which the box is killed and judged as for any run; ctx cancelled cancels
// the run (its box killed, a cell interrupted). A box that is gone, a record
// of another backend or one this runner cannot use answer a sandbox result
// saying the run's result is lost. A one-off box is removed once its result
// is in; a session lives on.
func (r *BoxRunner) Adopt(ctx context.Context, d Detached) contract.Result {
	job := d.Job
	job.RunID = d.RunID
	lost := func(why string) contract.Result {
		res := contract.Fail(job, contract.RunLost(why))
		res.Isolation = r.d.Isolation()
		return res
	}
	cancelledResult := func() contract.Result {
		res := contract.Fail(job, contract.Cancelled())
		res.Isolation = r.d.Isolation()
		return res
	}
	switch {
	case d.RunID == "" || d.BoxID == "":
		return lost("its record names no run or no box")
	case d.Isolation != r.d.Isolation():
		return lost("it ran under " + d.Isolation + ", this server runs " + r.d.Isolation())
	case d.Session != "":
		return r.adoptCell(ctx, d, job, lost)
	}
	found, err := r.d.FindBoxes(ctx, map[string]string{LabelManaged: "true"})
	if err != nil {
		if ctx.Err() != nil {
			return cancelledResult()
		}
		return lost("its box could not be looked for (" + AsEngineError(err).Msg + ")")
	}
	if why := adoptable(found, d); why != "" {
		return lost(why)
	}
	b, err := r.d.Attach(ctx, d.BoxID)
	if err != nil {
		if ctx.Err() != nil {
			return cancelledResult()
		}
		return lost("its box is gone (" + AsEngineError(err).Msg + ")")
	}
	r.alive.Add(1)
	defer r.remove(b)
	r.active()
	defer r.active()
	conn, err := b.Exchange(ctx)
	var ch *channel
	if err == nil {
		ch, err = reconnect(ctx, conn, maxStream(r.m.Limits))
	}
	if err != nil {
		if ctx.Err() != nil {
			b.Kill()
			return cancelledResult()
		}
		if !b.Alive() {
			return lost("its box ended before this server reached it")
		}
		return lost("its box did not answer (" + err.Error() + ")")
	}
	o := r.call(ctx, b, ch, job, r.callJob(job), r.m.Limits, nil, callMode{adopt: true, sent: d.Sent})
	if o.end == cancelled {
		return cancelledResult()
	}
	if unheld(o) {
		return lost(o.lost.why)
	}
	res := r.result(ctx, job, o, r.m.Limits)
	res.Isolation = r.d.Isolation()
	res.Metrics.StartupMs, res.Metrics.Pooled = d.StartupMs, d.Pooled
	return res
}

// adoptable says why d's one-off box may not be adopted, "" when it may.
// A record comes from the state directory and is believed no more than
// any file there: the box it names must be one of this deployment's
// running boxes (labelled as the reaper requires: [LabelManaged]), a
// one-off box (no session's) and not another run's, or the adoption
// would attach to, kill and remove a container that is not the run's.
func adoptable(found []FoundBox, d Detached) string {
	for _, b := range found {
		if b.ID != d.BoxID {
			continue
		}
		switch {
		case b.Labels[LabelManaged] != "true":
			return "its record names a box that is not runbox's"
		case b.Labels[LabelSession] != "":
			return "its record names a session's box"
		case b.Labels[LabelRunID] != "" && b.Labels[LabelRunID] != d.RunID:
			return "its record names the box of another run"
		}
		return ""
	}
	return "its box is gone (no running box of runbox's has its id)"
}

// adoptCell takes over the session whose cell d is, and collects the cell
// in its turn: the session is busy with it until it ends.
func (r *BoxRunner) adoptCell(ctx context.Context, d Detached, job contract.Job, lost func(string) contract.Result) contract.Result {
	s := r.sessionsOf()
	ls, gone := s.find(ctx, d.Session, d.Client)
	if ls == nil {
		if gone == "" {
			gone = "its session's box is gone"
		}
		return lost(gone)
	}
	s.mu.Lock()
	box := ls.box.ID()
	s.mu.Unlock()
	if box != d.BoxID {
		return lost("its session runs in another box")
	}
	return r.inTurn(ctx, ls, job, func() contract.Result {
		res, why := r.callSession(ctx, ls, job, nil, callMode{session: true, adopt: true, sent: d.Sent})
		s.settle(ls, &res, why)
		res.Isolation = r.d.Isolation()
		return res
	})
}

// unheld says whether an adopted run's box answered no report for want of
// one (it never got the job, or no longer holds its outcome, or ended):
// the run's result is lost. A box killed at the deadline, out of memory
// or breaking the protocol is judged as any run.
func unheld(o outcome) bool {
	return o.report == nil && o.end == answered && !o.oomKilled && o.lost.cause != lossViolation
}

// reconnect opens a one-off box's channel again (a restarted server).
func reconnect(ctx context.Context, conn Conn, max int64) (*channel, error) {
	ch, w, err := openAgain(ctx, conn, max, APITimeout)
	if err != nil {
		return nil, err
	}
	ch.end = w.End
	return ch, nil
}
