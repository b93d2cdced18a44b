package tools

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// A task's call (internal/mcpserver's task layer) leaves its run's result
// in the registry of runs in flight; these render it for the task layer.

// AdoptTask finishes, in a restarted server, the run of an MCP task whose
// server stopped (inflight.Registry.AdoptTask), and answers its result.
func (d Deps) AdoptTask(ctx context.Context, taskID string) *mcp.CallToolResult {
	if d.InFlight == nil {
		res := contract.Fail(contract.Job{}, contract.RunLost("this server keeps no runs"))
		res.Isolation = d.Manifest.Isolation
		return render(ctx, d.Manifest, res)
	}
	return render(ctx, d.Manifest, d.InFlight.AdoptTask(ctx, taskID))
}

// TaskRun names the ended run of task taskID's call, which keeps the
// task's result (inflight.Registry.TaskRun).
func (d Deps) TaskRun(taskID string) (runID string, ok bool) {
	if d.InFlight == nil {
		return "", false
	}
	return d.InFlight.TaskRun(taskID)
}

// TaskAnswer renders the result of task taskID's run for its client, as
// its call answered it (contentOnly: without the structured content, for
// a client that reads content only); a result no longer kept answers that
// it is lost.
func (d Deps) TaskAnswer(_ context.Context, taskID string, contentOnly bool) *mcp.CallToolResult {
	m := d.Manifest
	var res contract.Result
	ok := false
	if d.InFlight != nil {
		res, ok = d.InFlight.TaskResult(taskID)
	}
	if !ok {
		res = contract.Fail(contract.Job{}, contract.RunLost("its result is no longer kept"))
		res.Isolation = m.Isolation
	}
	out := ToCallToolResult(m, contract.ForModel(res, m.Limits.AnswerChars))
	if contentOnly {
		out.StructuredContent = nil
	}
	return out
}
