package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// A run that outlasts limits.answer_within_seconds answers with a handle
// (status running, its run_id) and goes on in the background; run_wait
// collects it, run_cancel stops it. This is the layer around the
// pipeline (Deps.Run) that does it, and the two tools.

// Tool names of the handle.
const (
	RunWaitName   = contract.ToolRunWait
	RunCancelName = contract.ToolRunCancel
)

// TaskCallPrefix begins the progress token of a call made as an MCP task
// (internal/mcpserver's task layer gives each task's call one): such a
// call answers at once as a task, so it is never cut, but it is a long
// run for the caps.
const TaskCallPrefix = "runbox-task/"

// isTaskCall reports whether req is a task's call.
func isTaskCall(req mcp.CallToolRequest) bool { return taskOf(req) != "" }

// taskOf is the task id of a task's call, or "".
func taskOf(req mcp.CallToolRequest) string {
	if req.Params.Meta == nil {
		return ""
	}
	token, _ := req.Params.Meta.ProgressToken.(string)
	id, _ := strings.CutPrefix(token, TaskCallPrefix)
	if id == token {
		return ""
	}
	return id
}

// AnswerWithinMeta is the tools/call _meta key with which a client says
// how long it waits for a call's answer, in seconds: a run still going
// then answers running (the run handle). 0 waits for the run's end,
// however long (the client waits that long); without it the manifest's
// limits.answer_within_seconds holds.
const AnswerWithinMeta = "io.runbox/answer_within_seconds"

// answerWithin is how long the call waits before answering running: the
// client's AnswerWithinMeta, else the manifest's bound.
func (h *Handles) answerWithin(req mcp.CallToolRequest) time.Duration {
	if req.Params.Meta == nil {
		return h.within
	}
	var secs float64
	switch v := req.Params.Meta.AdditionalFields[AnswerWithinMeta].(type) {
	case float64:
		secs = v
	case int:
		secs = float64(v)
	case int64:
		secs = float64(v)
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return h.within
		}
		secs = f
	default:
		return h.within
	}
	if !(secs >= 0) || secs > 24*3600 {
		return h.within
	}
	return time.Duration(secs * float64(time.Second))
}

// answerCall runs the call and answers it: at its end, or with a handle
// once limits.answer_within_seconds pass (a task's call is never cut, a
// long run past the caps is refused).
func (d Deps) answerCall(ctx context.Context, req mcp.CallToolRequest, c Call) *mcp.CallToolResult {
	m, h := d.Manifest, d.Handles
	if h == nil {
		return answer(ctx, m, d.Store, d.Run(ctx, c))
	}
	owner := c.Client
	if task := taskOf(req); task != "" {
		if bad := h.take(owner); bad != nil {
			return answer(ctx, m, nil, d.refused(c, *bad))
		}
		defer h.release(owner)
		// A task's run is kept by task id, its result the task's; with a
		// store it is durable from its start: its record lets a
		// restarted server finish the task.
		hd := h.beginTask(owner, req.Params.Name, task, c)
		c.RunID, c.Hold = hd.RunID, heldRun{h, hd}
		res := d.Run(ctx, c)
		h.finish(hd, res)
		return answer(ctx, m, d.Store, res)
	}
	within := h.answerWithin(req)
	if within <= 0 || h.within <= 0 {
		return answer(ctx, m, d.Store, d.Run(ctx, c))
	}
	// The run outlives the call: its context keeps the call's values
	// (the client, its session, the server) but not its end.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(h.base, cancel)
	hd := h.begin(owner, req.Params.Name, c.Args.Language, cancel)
	c.RunID, c.Hold = hd.RunID, heldRun{h, hd}
	go func() {
		defer unhook()
		defer cancel()
		res := d.Run(runCtx, c)
		keepResources(runCtx, m, d.Store, res)
		h.finish(hd, res)
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-hd.done:
		return render(ctx, m, *hd.Result)
	case <-ctx.Done():
		// The client gave up the call: stop the run, as a plain call.
		cancel()
		<-hd.done
		return render(ctx, m, *hd.Result)
	case <-t.C:
	}
	if h.toBackground(hd) {
		h.mu.Lock()
		hd.call = runs.RecordCall(c)
		h.mu.Unlock()
		h.persist(hd)
		return d.running(ctx, hd)
	}
	if hd.refused != nil {
		cancel()
	}
	<-hd.done
	if hd.refused != nil {
		res := contract.Fail(contract.Job{RunID: hd.RunID}, *hd.refused)
		res.Language, res.Isolation = c.Args.Language, m.Isolation
		return answer(ctx, m, nil, res)
	}
	return render(ctx, m, *hd.Result)
}

// heldRun is a run handle as the pipeline sees it (runs.Hold).
type heldRun struct {
	h  *Handles
	hd *handle
}

// OnSent joins the box's record to a durable handle's.
func (r heldRun) OnSent() func(sandbox.Detached) {
	if r.h.store == nil {
		return nil
	}
	return func(det sandbox.Detached) { r.h.sent(r.hd, det) }
}

// End tells the handle the run is over, so its call waits for the answer
// rather than answering running.
func (r heldRun) End() *contract.ErrorInfo { return r.h.end(r.hd) }

// Keep holds the run's audit line until the run is collected or
// abandoned.
func (r heldRun) Keep(e *audit.Entry) bool { return r.h.hold(r.hd, e) }

// refused is the result of a call refused before it ran.
func (d Deps) refused(c Call, bad contract.ErrorInfo) contract.Result {
	res := contract.Fail(contract.Job{RunID: runs.NewRunID()}, bad)
	res.Language, res.Isolation = c.Args.Language, d.Manifest.Isolation
	return res
}

// running is the answer of a run still going: its handle, and its output
// so far when its box tells it in time (cut to the answer's budget as a
// result's is; the store keeps nothing of it: the result brings it all).
func (d Deps) running(ctx context.Context, hd *handle) *mcp.CallToolResult {
	res := contract.Result{RunID: hd.RunID, Language: hd.Language, Status: contract.StatusRunning,
		Running: contract.StillRunning(time.Since(hd.Started), RunWaitName), Artifacts: []contract.Artifact{}, Isolation: d.Manifest.Isolation}
	if d.Runner != nil {
		if p, ok := d.Runner.Peek(ctx, hd.RunID); ok {
			res.Stdout, res.Stderr = p.Stdout, p.Stderr
			res.StdoutBytes, res.StderrBytes = p.StdoutBytes, p.StderrBytes
			res.StdoutTruncated, res.StderrTruncated = p.StdoutTruncated, p.StderrTruncated
			res.Running.Output = contract.OutputSoFar(p.StdoutBytes, p.StderrBytes)
		}
	}
	return answer(ctx, d.Manifest, nil, res)
}

// RunWaitArgs are run_wait's arguments.
type RunWaitArgs struct {
	RunID       string   `json:"run_id" jsonschema:"required,description=The run_id of a run_code answer whose status was running."`
	WaitSeconds *float64 `json:"wait_seconds,omitempty" jsonschema:"description=How long to wait for the run's end before answering running again (at most the server's bound; the default is that bound)."`
}

// RunCancelArgs are run_cancel's arguments.
type RunCancelArgs struct {
	RunID string `json:"run_id" jsonschema:"required,description=The run_id of a run_code answer whose status was running."`
}

// RunHandleTools are run_wait and run_cancel, when the manifest answers
// long runs with a handle (limits.answer_within_seconds above 0).
func RunHandleTools(d Deps) []server.ServerTool {
	m, h := d.Manifest, d.Handles
	if h == nil || h.within <= 0 {
		return nil
	}
	within := m.Limits.AnswerWithinSeconds
	wait := handleTool(RunWaitName, "Wait for a background run", fmt.Sprintf("Wait for a run that run_code (or a saved tool) answered with status running, and get its result: "+
		"while the run goes on this answers status running again after wait_seconds (at most %g, the default), so call it again; once the run ends it answers the full result, exactly as run_code would have. "+
		"A finished run's result stays available for a while (the same as its artifacts); a run id of another client is unknown.", within), &RunWaitArgs{}, true, false)
	cancelT := handleTool(RunCancelName, "Stop a background run", "Stop a run that run_code (or a saved tool) answered with status running: its sandbox is killed at once and this answers the run's result (error.kind sandbox, cancelled). A run that already ended answers its result.", &RunCancelArgs{}, false, true)
	return []server.ServerTool{
		{Tool: wait, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a RunWaitArgs
			if err := decodeStrict(req, &a); err != nil {
				return answer(ctx, m, nil, d.refused(Call{}, contract.Invalid("bad arguments: %v", err))), nil
			}
			wait := h.within
			if a.WaitSeconds != nil {
				if !(*a.WaitSeconds >= 0) {
					return answer(ctx, m, nil, d.refused(Call{}, contract.Invalid("wait_seconds must be 0 or more, at most %g", within))), nil
				}
				wait = min(wait, time.Duration(*a.WaitSeconds*float64(time.Second)))
			}
			out, hd, ok := d.wait(ctx, PrincipalOf(ctx), a.RunID, wait)
			return d.handleAnswer(ctx, a.RunID, out, hd, ok), nil
		}},
		{Tool: cancelT, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a RunCancelArgs
			if err := decodeStrict(req, &a); err != nil {
				return answer(ctx, m, nil, d.refused(Call{}, contract.Invalid("bad arguments: %v", err))), nil
			}
			out, hd, ok := d.cancelRun(ctx, PrincipalOf(ctx), a.RunID)
			return d.handleAnswer(ctx, a.RunID, out, hd, ok), nil
		}},
	}
}

// handleAnswer is run_wait's and run_cancel's answer: the run's result,
// its handle again while it goes on, or an unknown run.
func (d Deps) handleAnswer(ctx context.Context, id string, out *contract.Result, hd *handle, ok bool) *mcp.CallToolResult {
	switch {
	case !ok:
		res := contract.Fail(contract.Job{RunID: id}, contract.UnknownRun(id))
		res.Isolation = d.Manifest.Isolation
		return answer(ctx, d.Manifest, nil, res)
	case out == nil:
		return d.running(ctx, hd)
	}
	return render(ctx, d.Manifest, *out)
}

func handleTool(name, title, desc string, args any, readOnly, destructive bool) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, mustJSON(reflectSchema(args)))
	t.Icons = Icons
	t.RawOutputSchema = OutputSchema()
	t.Annotations = mcp.ToolAnnotation{Title: title, ReadOnlyHint: mcp.ToBoolPtr(readOnly), DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(false)}
	return t
}
