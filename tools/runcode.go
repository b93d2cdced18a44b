package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/expose"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/internal/stagetrace"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/inflight"
)

// RunCodeName is the tool's name.
const RunCodeName = contract.ToolRunCode

// Deps are what the tools need: the run service, whose pipeline
// (Service.Run) every call runs through, and the MCP layer's own.
type Deps struct {
	runs.Service
	// Store keeps artifacts readable as resources; nil keeps none.
	Store *runs.ArtifactStore
	// InFlight is the registry of runs in flight: it answers runs past
	// limits.answer_within_seconds with a handle, keeps the runs of MCP
	// tasks' calls and caps long runs (runwait.go); nil: every call waits
	// for its run.
	InFlight *inflight.Registry
	// Exposures are the server's previews (session_expose), which the
	// session tools name with their sessions; nil: none.
	Exposures *expose.Set
}

// progressEvery is how often a long run reports progress to a client that
// asked for it: well inside clients' ~60 s tool timeouts.
const progressEvery = 2 * time.Second

// RunCode is the run_code tool: its definition and handler.
func RunCode(d Deps) server.ServerTool {
	m := d.Manifest
	tool := mcp.NewToolWithRawSchema(RunCodeName, contract.ToolDescription(m)+ServersParagraph(d.Upstream), InputSchema(m))
	tool.RawOutputSchema = OutputSchema()
	tool = withSizeHint(m, tool)
	// Every hint set explicitly: the defaults say the opposite of what
	// run_code is.
	tool.Annotations = mcp.ToolAnnotation{
		Title:           contract.RunCodeTitle,
		ReadOnlyHint:    mcp.ToBoolPtr(false),
		DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint:  mcp.ToBoolPtr(false),
		OpenWorldHint:   mcp.ToBoolPtr(m.Network.Enabled()),
	}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tr := stagetrace.Start("host: handler entered")
		c := runs.DecodeCall(arguments(req))
		tr.Mark("host: arguments decoded")
		out := d.callTool(stagetrace.With(ctx, tr), req, c)
		tr.Mark("host: answer rendered")
		tr.Log(d.Logger, runs.NewRunID())
		return out, nil
	}}
}

// callTool answers an MCP call of run_code or of a saved tool: it settles
// the call's input requests first (approvals of the network endpoints the
// manifest asks about, and the client's roots for a call outside a
// session, whose box has the roots it was opened with), names who calls,
// reports progress to a client that asked for it, runs the pipeline
// (Deps.Run) and renders the result for the client's model.
func (d Deps) callTool(ctx context.Context, req mcp.CallToolRequest, c Call) *mcp.CallToolResult {
	m := d.Manifest
	approver, ask := networkApproval(ctx, m, req)
	if c.Args.SessionID == "" {
		var askRoots *mcp.CallToolResult
		c.Roots, askRoots = clientRoots(ctx, m, req, d.Logger)
		ask = withInputRequests(ask, askRoots)
	}
	if ask != nil {
		return ask
	}
	c.Approver = approver
	c.Client, c.App = PrincipalOf(ctx), ClientOf(ctx)
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		stop := reportProgress(ctx, req.Params.Meta.ProgressToken)
		defer stop()
	}
	return d.answerCall(ctx, req, c)
}

// reportProgress sends notifications/progress until stopped, so a client
// sees a long run is alive instead of hitting its own timeout.
func reportProgress(ctx context.Context, token mcp.ProgressToken) (stop func()) {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return func() {}
	}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				elapsed := time.Since(start).Seconds()
				_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
					"progressToken": token,
					"progress":      elapsed,
					"message":       fmt.Sprintf("running for %.0f s", elapsed),
				})
			}
		}
	}()
	return func() { close(done) }
}
