package sandbox

import (
	"context"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/stagetrace"
	"github.com/runbox-mcp/runbox/manifest"
)

// RunInSession runs job in client's session id. It always returns a
// result; a session that is not client's is session_not_found.
func (r *BoxRunner) RunInSession(ctx context.Context, id, client string, req RunRequest) contract.Result {
	job := req.Job
	s := r.sessionsOf()
	ls, gone := s.find(ctx, id, client)
	if ls == nil {
		if gone != "" {
			return contract.Fail(job, contract.SessionGone(gone))
		}
		return contract.Fail(job, contract.NoSession())
	}
	if ls.lang.Name != job.Language.Name {
		return contract.Fail(job, contract.Invalid("session %s runs %s, not %s", id, ls.lang.Name, job.Language.Name))
	}
	tr := stagetrace.From(ctx)
	tr.Mark("host: session found")
	return r.inTurn(ctx, ls, job, func() contract.Result {
		tr.Mark("host: session's turn")
		return r.admitted(ctx, job, func() contract.Result {
			tr.Mark("host: admitted")
			// The call's tool calls and proxied connections are served as
			// in a one-off run: req's handlers, and a fresh proxy for this
			// call.
			streams, px := r.withProxy(req)
			var mode callMode
			if req.OnSent != nil {
				mode.onSent = func(sent time.Time) {
					s.mu.Lock()
					box := ls.box.ID()
					s.mu.Unlock()
					req.OnSent(Detached{RunID: job.RunID, BoxID: box, Isolation: r.d.Isolation(), Session: id, Client: client,
						Job: job, Sent: sent})
				}
			}
			res, lost := r.callSession(ctx, ls, job, streams, mode)
			if px != nil {
				withNetwork(&res, px.Records())
			}
			s.settle(ls, &res, lost)
			if lost == "" {
				s.keepCell(ls, job.Code)
			}
			s.logCell(ls, job.Code, res)
			tr.Mark("host: session settled")
			return res
		})
	})
}

// inTurn runs call in the session's turn, the session marked busy with
// job's run meanwhile; a call cancelled while it waits answers at once.
func (r *BoxRunner) inTurn(ctx context.Context, ls *liveSession, job contract.Job, call func() contract.Result) contract.Result {
	s := r.sessionsOf()
	select {
	case <-ls.turn:
	case <-ctx.Done():
		return contract.Fail(job, contract.Cancelled())
	}
	defer func() { ls.turn <- struct{}{} }()
	s.mu.Lock()
	if s.live[ls.key] != ls {
		s.mu.Unlock()
		return contract.Fail(job, contract.NoSession())
	}
	ls.busy, ls.running = true, job.RunID
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		ls.busy, ls.running = false, ""
		ls.lastUsed = time.Now()
		s.mu.Unlock()
	}()
	return call()
}

// settle counts a session's call and, when lost says its state is gone,
// ends the session; res tells the session's state either way.
func (s *sessions) settle(ls *liveSession, res *contract.Result, lost string) {
	s.mu.Lock()
	s.calls++
	if res.Session != nil {
		ls.calls = res.Session.Call
	}
	s.mu.Unlock()
	if lost != "" {
		if res.Session != nil {
			res.Session.State, res.Session.LostReason = contract.SessionLost, lost
		}
		if res.Error == nil {
			res.Status, res.Error = contract.StatusError, ptr(contract.SessionGone(lost))
		} else if res.Error.Kind != contract.KindSessionLost {
			res.Error.Hint += contract.LostHint
		}
		s.end(ls, lost, true)
	}
	if res.Session != nil {
		s.mu.Lock()
		res.Session.ExpiresAt = s.info(ls).ExpiresAt
		if lost != "" {
			res.Session.ExpiresAt = time.Now()
		}
		s.mu.Unlock()
	}
}

// callSession makes one call over the session's channel, opening it
// (again) when needed; lost says why the session's state is gone.
func (r *BoxRunner) callSession(ctx context.Context, ls *liveSession, job contract.Job, streams *initproto.Streams, mode callMode) (res contract.Result, lost string) {
	mode.session = true
	if ls.ch != nil && ls.ch.closed() {
		// Ended while idle (another server attached to the box and reset
		// its channel, or the box flooded it): no job is lost, open it
		// again.
		ls.ch.close()
		ls.ch = nil
	}
	if ls.ch == nil {
		ch, err := r.connectSession(ctx, ls)
		if err != nil {
			r.log.Warn("session box did not answer", "run_id", job.RunID, "box", ls.box.ID(), "err", err)
			if !ls.box.Alive() {
				return contract.Fail(job, contract.SessionGone("its box is gone")), "its box is gone"
			}
			return engineFail(job, err), ""
		}
		ls.ch = ch
	}
	ij := r.sessionCallJob(job)
	ij.Dir, ij.CodePath = manifest.Workspace, manifest.Workspace+"/"+job.Language.File
	tr := stagetrace.From(ctx)
	ij.Trace = tr != nil
	tr.Mark("host: job built")
	o := r.call(ctx, ls.box, ls.ch, job, ij, ls.limits, streams, mode)
	if o.report == nil || ls.ch.closed() {
		ls.ch.close()
		ls.ch = nil
	}
	if mode.adopt && unheld(o) && ls.box.Alive() {
		// The box lives on but holds no report of the cell: the run is
		// lost, the session is not.
		return r.sessionRef(contract.Fail(job, contract.RunLost(o.lost.why)), ls, 0), ""
	}
	res = r.result(ctx, job, o, ls.limits)
	tr.Mark("host: result built")
	call := 0
	switch {
	case o.lost.cause == lossViolation:
		lost = "the box broke the channel protocol"
	case o.end == backstopped:
		lost = "the call ran past its timeout and the session's box was killed"
	case o.session == nil && o.oomKilled:
		lost = "the session's box ran out of memory"
	case o.session == nil:
		lost = "the session's box ended"
	default:
		call, lost = o.session.Calls, o.session.Lost
	}
	if o.end == interrupted && lost == "" {
		info := contract.Cancelled()
		info.Message = "the call was cancelled and the running code interrupted; the session and its state live on"
		res.Status, res.Error = contract.StatusError, &info
	}
	return r.sessionRef(res, ls, call), lost
}

// sessionInterruptWait is how long a cancelled call waits for the
// interrupted cell's report (runbox-init gives the cell 3 s).
const sessionInterruptWait = 5 * time.Second

func (r *BoxRunner) sessionRef(res contract.Result, ls *liveSession, call int) contract.Result {
	if call == 0 {
		call = ls.calls + 1
	}
	res.Session = &contract.SessionRef{ID: ls.id, Call: call, State: contract.SessionAlive}
	return res
}
