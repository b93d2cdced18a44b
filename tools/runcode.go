package tools

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/egress"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/stagetrace"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/upstream"
)

// RunCodeName is the tool's name.
const RunCodeName = "run_code"

// Deps are what the tools need.
type Deps struct {
	Manifest *manifest.Manifest
	Runner   sandbox.Runner
	// Store keeps artifacts readable as resources; nil keeps none.
	Store *ArtifactStore
	// Budgets bound each client session; nil means none.
	Budgets *Budgets
	// Audit logs every call; nil logs none.
	Audit *audit.Log
	// Transport names how calls arrive (stdio, http, sse), for the log.
	Transport string
	// Logger reports what cannot be logged.
	Logger *slog.Logger
	// Metrics counts every answered call; nil counts none.
	Metrics interface{ Observe(contract.Result) }
	// Upstream are the servers the code may call (toolcalls.go); nil:
	// none.
	Upstream *upstream.Set
	// ToolMetrics counts the code's tool calls; nil counts none.
	ToolMetrics ToolCallMetrics
	// Handles answers runs past limits.answer_within_seconds with a
	// handle and caps long runs (runwait.go); nil: every call waits for
	// its run.
	Handles *Handles
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
		Title:           "Run code in a sandbox",
		ReadOnlyHint:    mcp.ToBoolPtr(false),
		DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint:  mcp.ToBoolPtr(false),
		OpenWorldHint:   mcp.ToBoolPtr(m.Network.Enabled()),
	}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tr := stagetrace.Start("host: handler entered")
		c := DecodeCall(arguments(req))
		tr.Mark("host: arguments decoded")
		out := d.callTool(stagetrace.With(ctx, tr), req, c)
		tr.Mark("host: answer rendered")
		tr.Log(d.Logger, runIDOf(ctx))
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

// Call is one run_code call, decoded once, and who makes it: the
// arguments as they came (kept verbatim by the audit log's store_code) and
// as read, or why they could not be read; the client, and what it settled
// for this call (its roots, its approvals).
type Call struct {
	// Raw are the arguments as they came; nil: Args, marshalled when the
	// audit log keeps them.
	Raw  []byte
	Args RunCodeArgs
	// Bad says why Raw could not be read; the call answers it.
	Bad *contract.ErrorInfo
	// Client is who calls, for sessions (PrincipalOf); empty: the one in
	// the run's context.
	Client string
	// App is the calling application as the audit log names it (ClientOf);
	// its Session is what the client's budgets bound.
	App audit.Client
	// Roots are the client's roots mounted for a run outside a session (a
	// session's box has those it was opened with).
	Roots []sandbox.HostMount
	// Approver answers for the network endpoints the manifest asks about;
	// nil refuses them.
	Approver egress.Approver
}

// DecodeCall reads a call's raw arguments, strictly (see DecodeArgs).
func DecodeCall(raw []byte) Call {
	args, bad := DecodeArgs(raw)
	return Call{Raw: raw, Args: args, Bad: bad}
}

// Run is the run_code pipeline, once for every caller (the MCP handler,
// saved tools, `runbox run`, `runbox replay` and doctor): admit the call
// against its client's budget, validate it against the manifest, run it
// (in a fresh box or its session), then charge the budget, count it and
// audit it. What a Deps leaves nil is skipped. The answer is the caller's
// to render.
func (d Deps) Run(ctx context.Context, c Call) contract.Result {
	m := d.Manifest
	if d.Budgets != nil {
		if bad := d.Budgets.Admit(c.App.Session); bad != nil {
			res := contract.Fail(contract.Job{RunID: NewRunID()}, *bad)
			res.Isolation = m.Isolation
			return res
		}
	}
	streams, calls := d.toolCalls()
	res := d.ended(ctx, d.run(ctx, c, streams))
	tr := stagetrace.From(ctx)
	tr.Mark("host: run's result")
	if c.Args.SessionID == "" {
		res.Roots = sandbox.Roots(c.Roots)
	}
	if d.Budgets != nil {
		d.Budgets.Charge(c.App.Session, time.Duration(res.Metrics.WallMs)*time.Millisecond)
	}
	if d.Metrics != nil {
		d.Metrics.Observe(res)
	}
	if d.Audit != nil {
		e := AuditEntry(m, d.Transport, c, res)
		var n int
		e.ToolCalls, n = calls()
		e.Redacted += n
		if err := d.record(ctx, e); err != nil && d.Logger != nil {
			d.Logger.Warn("audit log", "run_id", res.RunID, "err", err)
		}
	}
	tr.Mark("host: budgets, metrics, audit")
	return res
}

// run validates the call and runs its job, with its roots, its approver
// and streams serving its code's tool calls: the one place the pipeline
// calls the runner.
func (d Deps) run(ctx context.Context, c Call, streams *initproto.Streams) contract.Result {
	m := d.Manifest
	runID := runIDOf(ctx)
	var job contract.Job
	bad := c.Bad
	if bad == nil {
		job, bad = Validate(m, c.Args, runID)
	}
	if bad != nil {
		res := contract.Fail(contract.Job{RunID: runID}, *bad)
		res.Language = c.Args.Language
		res.Isolation = m.Isolation
		return res
	}
	var res contract.Result
	req := sandbox.RunRequest{Job: job, Mounts: c.Roots, Streams: streams, Approve: c.Approver, OnSent: d.onSent(ctx)}
	if c.Args.SessionID == "" {
		res = d.Runner.Run(ctx, req)
	} else if sr := d.Runner.Sessions(); sr != nil && m.Sessions.Enabled {
		client := c.Client
		if client == "" {
			client = PrincipalOf(ctx)
		}
		res = sr.RunInSession(ctx, c.Args.SessionID, client, req)
	} else {
		res = contract.Fail(job, contract.Invalid("this server keeps no sessions: run the code without session_id"))
		res.Isolation = m.Isolation
	}
	if c.Args.SaveArtifacts {
		saveArtifacts(m.Outputs, &res)
	}
	return res
}
