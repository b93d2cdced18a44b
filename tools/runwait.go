package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/inflight"
)

// A run that outlasts limits.answer_within_seconds answers with a handle
// (status running, its run_id) and goes on in the background; run_wait
// collects it, run_cancel stops it. The registry of runs in flight
// (runs/inflight) does it around the pipeline; this is its MCP side: the
// bound and the task a request names, the answers, and the two tools.

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
func answerWithin(req mcp.CallToolRequest, bound time.Duration) time.Duration {
	if req.Params.Meta == nil {
		return bound
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
			return bound
		}
		secs = f
	default:
		return bound
	}
	if !(secs >= 0) || secs > 24*3600 {
		return bound
	}
	return time.Duration(secs * float64(time.Second))
}

// answerCall runs the call and answers it: at its end, or with a handle
// once limits.answer_within_seconds pass (a task's call is never cut, a
// long run past the caps is refused), through the registry of runs in
// flight.
func (d Deps) answerCall(ctx context.Context, req mcp.CallToolRequest, c Call) *mcp.CallToolResult {
	m, h := d.Manifest, d.InFlight
	if h == nil {
		return answer(ctx, m, d.Store, d.Run(ctx, c))
	}
	a := h.Call(ctx, d.Service, c, inflight.How{Tool: req.Params.Name, Task: taskOf(req), Within: answerWithin(req, h.Within())})
	if a.Running != nil {
		return d.running(ctx, *a.Running)
	}
	return render(ctx, m, a.Result)
}

// refused is the result of a call refused before it ran.
func (d Deps) refused(c Call, bad contract.ErrorInfo) contract.Result {
	res := contract.Fail(contract.Job{RunID: runs.NewRunID()}, bad)
	res.Language, res.Isolation = c.Args.Language, d.Manifest.Isolation
	return res
}

// running is the answer of a run still going: its handle, and its output
// so far when its box tells it in time (cut to the answer's budget as a
// result's is; the store keeps nothing of it: the result brings it all).
func (d Deps) running(ctx context.Context, run inflight.Held) *mcp.CallToolResult {
	res := contract.Result{RunID: run.RunID, Language: run.Language, Status: contract.StatusRunning,
		Running: contract.StillRunning(time.Since(run.Started), RunWaitName), Artifacts: []contract.Artifact{}, Isolation: d.Manifest.Isolation}
	if d.Runner != nil {
		if p, ok := d.Runner.Peek(ctx, run.RunID); ok {
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
	m, h := d.Manifest, d.InFlight
	if h == nil || h.Within() <= 0 {
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
			wait := h.Within()
			if a.WaitSeconds != nil {
				if !(*a.WaitSeconds >= 0) {
					return answer(ctx, m, nil, d.refused(Call{}, contract.Invalid("wait_seconds must be 0 or more, at most %g", within))), nil
				}
				wait = min(wait, time.Duration(*a.WaitSeconds*float64(time.Second)))
			}
			out, run, ok := h.Wait(ctx, PrincipalOf(ctx), a.RunID, wait)
			return d.handleAnswer(ctx, a.RunID, out, run, ok), nil
		}},
		{Tool: cancelT, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a RunCancelArgs
			if err := decodeStrict(req, &a); err != nil {
				return answer(ctx, m, nil, d.refused(Call{}, contract.Invalid("bad arguments: %v", err))), nil
			}
			out, run, ok := h.Cancel(ctx, PrincipalOf(ctx), a.RunID)
			return d.handleAnswer(ctx, a.RunID, out, run, ok), nil
		}},
	}
}

// handleAnswer is run_wait's and run_cancel's answer: the run's result,
// its handle again while it goes on, or an unknown run.
func (d Deps) handleAnswer(ctx context.Context, id string, out *contract.Result, run inflight.Held, ok bool) *mcp.CallToolResult {
	switch {
	case !ok:
		res := contract.Fail(contract.Job{RunID: id}, contract.UnknownRun(id))
		res.Isolation = d.Manifest.Isolation
		return answer(ctx, d.Manifest, nil, res)
	case out == nil:
		return d.running(ctx, run)
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
