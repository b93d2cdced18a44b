package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/internal/initproto"
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
}

// progressEvery is how often a long run reports progress to a client that
// asked for it: well inside clients' ~60 s tool timeouts.
const progressEvery = 2 * time.Second

// RunCode is the run_code tool: its definition and handler.
func RunCode(d Deps) server.ServerTool {
	m := d.Manifest
	tool := mcp.NewToolWithRawSchema(RunCodeName, m.ToolDescription()+ServersParagraph(d.Upstream), InputSchema(m))
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
		raw, err := json.Marshal(req.GetRawArguments())
		if err != nil {
			raw = nil
		}
		session := ""
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			session = cs.SessionID()
		}
		approver, ask := networkApproval(ctx, m, req)
		var roots []sandbox.HostMount
		if !sessionCall(req) {
			var askRoots *mcp.CallToolResult
			roots, askRoots = clientRoots(ctx, m, req, d.Logger)
			ask = withInputRequests(ask, askRoots)
		}
		if ask != nil {
			return ask, nil
		}
		if d.Budgets != nil {
			if bad := d.Budgets.Admit(session); bad != nil {
				res := contract.Fail(contract.Job{RunID: NewRunID()}, *bad)
				res.Isolation = m.Isolation
				return answer(ctx, m, nil, res), nil
			}
		}
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			stop := reportProgress(ctx, req.Params.Meta.ProgressToken)
			defer stop()
		}
		call := DecodeCall(raw)
		call.Client = PrincipalOf(ctx)
		call.Mounts, call.Approve = roots, approver
		var calls func() ([]audit.ToolCall, int)
		call.Streams, calls = d.toolCalls()
		res := call.Run(ctx, m, d.Runner)
		if call.Args.SessionID == "" {
			res.Roots = sandbox.Roots(roots)
		}
		if d.Budgets != nil {
			d.Budgets.Charge(session, time.Duration(res.Metrics.WallMs)*time.Millisecond)
		}
		if d.Metrics != nil {
			d.Metrics.Observe(res)
		}
		if d.Audit != nil {
			e := AuditEntry(m, d.Transport, ClientOf(ctx), call, res)
			var n int
			e.ToolCalls, n = calls()
			e.Redacted += n
			if err := d.Audit.Record(e); err != nil && d.Logger != nil {
				d.Logger.Warn("audit log", "run_id", res.RunID, "err", err)
			}
		}
		return answer(ctx, m, d.Store, res), nil
	}}
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

// Call is one run_code call, decoded once: the arguments as they came
// (kept verbatim by the audit log's store_code) and as read, or why they
// could not be read.
type Call struct {
	Raw  []byte
	Args RunCodeArgs
	Bad  *contract.ErrorInfo
	// Client is who calls, for sessions (PrincipalOf).
	Client string
	// Mounts, Streams and Approve are what the call brings to its run
	// besides its arguments (sandbox.RunRequest): the client's roots, the
	// handlers of its code's tool calls, the approver of the manifest's
	// approve: ask endpoints. Left empty, the run has none of them.
	Mounts  []sandbox.HostMount
	Streams *initproto.Streams
	Approve sandbox.Approver
}

// request is the run of job for this call.
func (c Call) request(job contract.Job) sandbox.RunRequest {
	return sandbox.RunRequest{Job: job, Mounts: c.Mounts, Streams: c.Streams, Approve: c.Approve}
}

// DecodeCall reads a call's raw arguments, strictly (see DecodeArgs).
func DecodeCall(raw []byte) Call {
	args, bad := DecodeArgs(raw)
	return Call{Raw: raw, Args: args, Bad: bad}
}

// Run validates and runs the call: the path shared by the MCP handler,
// `runbox run`, `runbox replay` and doctor.
func (c Call) Run(ctx context.Context, m *manifest.Manifest, r sandbox.Runner) contract.Result {
	runID := NewRunID()
	bad := c.Bad
	if bad == nil {
		var job contract.Job
		job, bad = Validate(m, c.Args, runID)
		if bad == nil && c.Args.SessionID != "" {
			res := runInSession(ctx, m, r, c, job)
			if c.Args.SaveArtifacts {
				saveArtifacts(m.Outputs, &res)
			}
			return res
		}
		if bad == nil {
			res := r.Run(ctx, c.request(job))
			if c.Args.SaveArtifacts {
				saveArtifacts(m.Outputs, &res)
			}
			return res
		}
	}
	res := contract.Fail(contract.Job{RunID: runID}, *bad)
	res.Language = c.Args.Language
	res.Isolation = m.Isolation
	return res
}

// Execute decodes, validates and runs one call from its raw arguments.
func Execute(ctx context.Context, m *manifest.Manifest, r sandbox.Runner, raw []byte) contract.Result {
	return DecodeCall(raw).Run(ctx, m, r)
}

// ExecuteArgs validates and runs arguments already held as a struct.
func ExecuteArgs(ctx context.Context, m *manifest.Manifest, r sandbox.Runner, args RunCodeArgs) contract.Result {
	return Call{Args: args}.Run(ctx, m, r)
}
