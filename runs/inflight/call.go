package inflight

import (
	"context"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// How is how one call goes through the registry.
type How struct {
	// Tool is the called tool's name, for the run's record and log.
	Tool string
	// Task is the id of the MCP task the call is made as, or "": a
	// task's call answers at its end, never cut, but counts as a long
	// run, and its run is kept by task id (TaskRun).
	Task string
	// Within is how long the call waits before answering running;
	// 0 or less waits for the run's end.
	Within time.Duration
}

// Answer is a call's answer: its result, or its run still going.
type Answer struct {
	// Result is the call's result, its resources kept already (for the
	// call's client), when Running is nil.
	Result contract.Result
	// Running is the run still going after How.Within, which goes on in
	// the background for Wait and Cancel.
	Running *Held
}

// Within is the manifest's limits.answer_within_seconds: how long a call
// waits before answering running (0: every call waits for its run's end).
func (h *Registry) Within() time.Duration { return h.within }

// Call runs svc's pipeline for c (c.Client is its owner) and answers it:
// at its end, or with the run still going once how.Within passes (a
// task's call is never cut; a long run past the caps is refused). svc is
// the caller's (its manifest may describe more than the registry's; their
// limits are the same).
func (h *Registry) Call(ctx context.Context, svc runs.Service, c runs.Call, how How) Answer {
	m := svc.Manifest
	owner := c.Client
	done := func(res contract.Result) Answer {
		h.keepResources(owner, res)
		return Answer{Result: res}
	}
	if how.Task != "" {
		if bad := h.take(owner); bad != nil {
			return Answer{Result: refused(svc, c, *bad)}
		}
		defer h.release(owner)
		hd := h.beginTask(owner, how.Tool, how.Task, c)
		c.RunID, c.Hold = hd.RunID, hook{h, hd}
		res := svc.Run(ctx, c)
		h.finish(hd, res)
		return done(res)
	}
	if how.Within <= 0 || h.within <= 0 {
		return done(svc.Run(ctx, c))
	}
	// The run outlives the call: its context keeps the call's values
	// (the client, its session, the server) but not its end.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(h.base, cancel)
	hd := h.begin(owner, how.Tool, c.Args.Language, cancel)
	c.RunID, c.Hold = hd.RunID, hook{h, hd}
	go func() {
		growStack()
		defer unhook()
		defer cancel()
		res := svc.Run(runCtx, c)
		h.keepResources(owner, res)
		h.finish(hd, res)
	}()
	t := time.NewTimer(how.Within)
	defer t.Stop()
	select {
	case <-hd.done:
		return Answer{Result: *hd.Result}
	case <-ctx.Done():
		// The client gave up the call: stop the run, as a plain call.
		cancel()
		<-hd.done
		return Answer{Result: *hd.Result}
	case <-t.C:
	}
	if h.toBackground(hd) {
		h.mu.Lock()
		hd.call = runs.RecordCall(c)
		h.mu.Unlock()
		h.persist(hd)
		run := h.snapshot(hd)
		return Answer{Running: &run}
	}
	if hd.refused != nil {
		cancel()
	}
	<-hd.done
	if hd.refused != nil {
		res := contract.Fail(contract.Job{RunID: hd.RunID}, *hd.refused)
		res.Language, res.Isolation = c.Args.Language, m.Isolation
		return Answer{Result: res}
	}
	return Answer{Result: *hd.Result}
}

// refused is the result of a call refused before it ran.
func refused(svc runs.Service, c runs.Call, bad contract.ErrorInfo) contract.Result {
	res := contract.Fail(contract.Job{RunID: runs.NewRunID()}, bad)
	res.Language, res.Isolation = c.Args.Language, svc.Manifest.Isolation
	return res
}

// keepResources keeps a result's resources (artifacts, displays, the
// streams its answer cuts) for owner, for its answer rendered now or
// later.
func (h *Registry) keepResources(owner string, res contract.Result) {
	if h.artifacts != nil {
		h.artifacts.Put(owner, res, contract.ForModel(res, h.m.Limits.AnswerChars))
	}
}

// hook is a run in the registry as the pipeline sees it (runs.Hold).
type hook struct {
	h  *Registry
	hd *handle
}

// OnSent joins the box's record to a durable run's.
func (r hook) OnSent() func(sandbox.Detached) {
	if r.h.store == nil {
		return nil
	}
	return func(det sandbox.Detached) { r.h.sent(r.hd, det) }
}

// End tells the registry the run is over, so its call waits for the
// answer rather than answering running.
func (r hook) End() *contract.ErrorInfo { return r.h.end(r.hd) }

// Keep holds the run's audit line until the run is collected or
// abandoned.
func (r hook) Keep(e *audit.Entry) bool { return r.h.hold(r.hd, e) }

// growStack grows the calling goroutine's stack to what a run's pipeline
// reaches, in one copy while it is shallow: a new goroutine starts small
// and grew several times down a call's path, each time copying every
// frame above it (by perf over session cells, stack copies were 8% of
// the server's time, a third of them this goroutine's).
//
//go:noinline
func growStack() {
	var pad [24 << 10]byte
	touch(pad[:])
}

//go:noinline
func touch(b []byte) { b[len(b)-1] = 1 }
