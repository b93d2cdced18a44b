package runs

import (
	"context"
	"log/slog"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/egress"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/stagetrace"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/upstream"
)

// LocalPrincipal is the one client of a stdio server, or of an HTTP
// server without named tokens, and of `runbox run`.
const LocalPrincipal = "local"

// Service runs calls: the run_code pipeline (Run) and what it needs.
// What a Service leaves nil is skipped.
type Service struct {
	Manifest *manifest.Manifest
	Runner   sandbox.Runner
	// Budgets bound each client session; nil means none.
	Budgets *Budgets
	// Audit logs every call; nil logs none.
	Audit *audit.Log
	// Transport names how calls arrive (stdio, http, sse, cli), for the
	// log.
	Transport string
	// Logger reports what cannot be logged.
	Logger *slog.Logger
	// Metrics counts every answered call; nil counts none.
	Metrics interface{ Observe(contract.Result) }
	// Upstream are the servers the code may call (toolcalls.go); nil:
	// none.
	Upstream *upstream.Set
	// Ask asks the calling client's user whether a tool call the policy
	// asks about may go out; nil: nobody can be asked.
	Ask upstream.Asker
	// ToolMetrics counts the code's tool calls; nil counts none.
	ToolMetrics ToolCallMetrics
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
	// Client is who calls, for sessions (the MCP layer's principal);
	// empty: LocalPrincipal.
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
	// RunID is the run's id, chosen by the caller (a long run's handle
	// names it before the run starts); empty: a new one.
	RunID string
	// Hold is the run's entry in the registry of runs in flight, which
	// follows the run when it has one (runs/inflight: a long run, an MCP
	// task's call); nil: none.
	Hold Hold
}

// Hold is a long run's record around the pipeline: it takes the box's
// record once the job is sent, hears that the run is over, and may keep
// the run's audit line until the run is collected or abandoned.
type Hold interface {
	// OnSent is the run's sandbox.RunRequest.OnSent; nil: none.
	OnSent() func(sandbox.Detached)
	// End says the run is over; a refusal it returns (a long run past
	// its caps) is the run's result.
	End() *contract.ErrorInfo
	// Keep takes the run's audit line to write when the run is
	// collected or abandoned; false: the pipeline writes it now.
	Keep(e *audit.Entry) bool
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
// to render. The run's id and its long run's record, if any, are the
// call's (Call.RunID, Call.Hold).
func (d Service) Run(ctx context.Context, c Call) contract.Result {
	m := d.Manifest
	if d.Budgets != nil {
		if bad := d.Budgets.Admit(c.App.Session); bad != nil {
			res := contract.Fail(contract.Job{RunID: NewRunID()}, *bad)
			res.Isolation = m.Isolation
			return res
		}
	}
	streams, calls := d.toolCalls()
	if c.RunID == "" {
		c.RunID = NewRunID()
	}
	res := d.run(ctx, c, streams)
	if c.Hold != nil {
		if bad := c.Hold.End(); bad != nil {
			res.Status, res.Error = contract.StatusError, bad
		}
	}
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
		// A long run's line is written once the run is collected or
		// abandoned (Hold.Keep), the others now.
		if c.Hold == nil || !c.Hold.Keep(&e) {
			if err := d.Audit.Record(e); err != nil && d.Logger != nil {
				d.Logger.Warn("audit log", "run_id", res.RunID, "err", err)
			}
		}
	}
	tr.Mark("host: budgets, metrics, audit")
	return res
}

// run validates the call and runs its job, with its roots, its approver
// and streams serving its code's tool calls: the one place the pipeline
// calls the runner.
func (d Service) run(ctx context.Context, c Call, streams *initproto.Streams) contract.Result {
	m := d.Manifest
	runID := c.RunID
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
	req := sandbox.RunRequest{Job: job, Mounts: c.Roots, Streams: streams, Approve: c.Approver}
	if c.Hold != nil {
		req.OnSent = c.Hold.OnSent()
	}
	if c.Args.SessionID == "" {
		res = d.Runner.Run(ctx, req)
	} else if sr := d.Runner.Sessions(); sr != nil && m.Sessions.Enabled {
		client := c.Client
		if client == "" {
			client = LocalPrincipal
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
