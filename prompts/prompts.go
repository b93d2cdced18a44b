package prompts

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
)

// Prompt names.
const (
	GuideName = "run_code_guide"
	DebugName = "debug_failed_run"
)

// All returns every prompt.
func All(m *manifest.Manifest) []server.ServerPrompt {
	return []server.ServerPrompt{Guide(m), Debug(m)}
}

// ArgumentError is a prompts/get argument the client got wrong: missing,
// or not of the shape the prompt needs. The client can fix it, so it is
// a JSON-RPC invalid-params error (-32602), not an internal one: it
// unwraps to mcp.ErrInvalidParams.
type ArgumentError struct {
	Prompt   string
	Argument string
	// Problem completes "argument X ...".
	Problem string
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("prompt %s: argument %q %s", e.Prompt, e.Argument, e.Problem)
}

// Unwrap makes the error an mcp.ErrInvalidParams.
func (e *ArgumentError) Unwrap() error { return mcp.ErrInvalidParams }

// checked refuses a call that lacks one of the prompt's required
// arguments before h sees it, so every prompt says it the same way.
func checked(p mcp.Prompt, h server.PromptHandlerFunc) server.ServerPrompt {
	return server.ServerPrompt{Prompt: p, Handler: func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		for _, a := range p.Arguments {
			if a.Required && req.Params.Arguments[a.Name] == "" {
				return nil, &ArgumentError{p.Name, a.Name, "is required: " + lowerFirst(strings.TrimSuffix(a.Description, "."))}
			}
		}
		return h(ctx, req)
	}}
}

// Guide tells an agent when and how to use run_code within the limits.
func Guide(m *manifest.Manifest) server.ServerPrompt {
	p := mcp.NewPrompt(GuideName, mcp.WithPromptDescription("How to use run_code well: when to run code, the sandbox's limits, returning files and plots, and reading structured errors."))
	return server.ServerPrompt{Prompt: p, Handler: func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("Using run_code", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(GuideText(m))),
		}), nil
	}}
}

// GuideText is the usage guide.
func GuideText(m *manifest.Manifest) string {
	l := m.Limits
	var b strings.Builder
	b.WriteString("You can run code with the run_code tool. Use it to compute, check an answer, transform data or make a plot, instead of guessing a result.\n\n")
	b.WriteString(contract.ToolDescription(m))
	fmt.Fprintf(&b, `

How to work with it:
1. Send complete, self-contained programs: every run starts from an empty /workspace and nothing persists. Pass data in files (path relative to /workspace; binary as base64) or stdin.
2. Keep runs short: the default limit is %gs (timeout_seconds up to %g). For long jobs, process a sample first.
3. Print summaries, not whole datasets: each stream keeps only its first and last %s.
4. Return files by writing them under /workspace: they come back as artifacts (images inline, everything as runbox://runs/{run_id}/files/{path} resources for %s). Save plots with plt.savefig("plot.png"), or show them with plt.show(): each figure shown comes back as an image in the result's displays. display(df) shows a pandas frame as a table (you read its head as markdown, with its whole shape); display(obj) also shows images, HTML and markdown; in JavaScript, display({"image/png": base64}) and console.table.
5. %s
6. When a run fails, read error.kind, error.line and error.hint, fix that one thing, and run again. Do not retry the same code unchanged.`,
		l.TimeoutSeconds, l.MaxTimeoutSeconds, l.OutputBytes/2, m.Artifacts.TTL(), networkAdvice(m))
	if l.AnswerWithinSeconds > 0 {
		fmt.Fprintf(&b, `

Long runs (up to timeout_seconds %g):
- A run still going after %gs answers status "running" with its run_id and its output so far (stdout and stderr until now; print progress lines to follow a long job), and goes on in the background. The whole output comes with its result.
- Call run_wait with that run_id: it waits up to %gs and answers "running" again while the run goes on (call it again), then the full result, exactly as run_code would have answered. The run and its result survive a restart of the server: after one, call run_wait again with the same run_id.
- Call run_cancel with the run_id to stop a run you no longer need (its sandbox is killed). You may hold %d such runs at once; past that a run is refused with error.kind resource_limit (limit background_runs): collect or cancel one first.`,
			l.MaxTimeoutSeconds, l.AnswerWithinSeconds, l.AnswerWithinSeconds, l.MaxBackgroundRunsPerClient)
	}
	if len(m.Servers) > 0 {
		b.WriteString(`

Calling the user's MCP tools from code (their results stay in the program; print only what you need):
- Find tools with search_tools {"query": "...", "language": "python"} (or "typescript"): each hit is a typed signature, e.g. tools.<server>.add(*, a: float, b: float) -> Any in Python, tools.<server>.add(args: { a: number; b: number }): Promise<unknown> in TypeScript and JavaScript.
- Call them as the signature says: Python tools.<server>.<tool>(a=1, b=2) with keyword arguments; JavaScript await tools.<server>.<tool>({a: 1, b: 2}). help(tools.<server>.<tool>) shows the signature and the arguments' docs.
- A wrong argument (unknown, missing or of the wrong type) raises ToolError kind bad_request before the call is sent: read its message, fix the call, run again. Other failures raise ToolError with kind tool_error, denied, refused, limit, timeout or upstream.`)
	}
	if s := m.Sessions; s.Enabled {
		sl := m.SessionLimits()
		fmt.Fprintf(&b, `

When a session pays (session_open, then run_code with its session_id):
- Iterative work on the same data: load a large file once, then explore it over many short calls, as in a notebook (the value of a cell's last expression is shown).
- Slow set-up: heavy imports or a model or index built once and used many times.
- Not for a one-off computation: a plain run_code is simpler and starts clean.
A session's box has %s of memory and %d processes; it closes after %gs idle and at the latest %gs after it opened (at most %d per client). A call that times out or runs out of memory loses the session's state (session_lost): open a new session and re-run the set-up code. Close sessions you no longer need with session_close.`,
			sl.Memory, sl.Pids, s.IdleTTLSeconds, s.MaxLifetimeSeconds, s.MaxPerClient)
	}
	return b.String()
}

// Debug guides a bounded fix-and-retry loop from a failed run's result.
func Debug(m *manifest.Manifest) server.ServerPrompt {
	p := mcp.NewPrompt(DebugName,
		mcp.WithPromptDescription("Given a failed run_code result, guide a bounded fix-and-retry loop."),
		mcp.WithArgument("result", mcp.RequiredArgument(), mcp.ArgumentDescription("The failed run's structured result (run_code's structuredContent, as JSON).")),
		mcp.WithArgument("max_attempts", mcp.ArgumentDescription("How many fixed versions to try before stopping (default 3).")),
	)
	return checked(p, func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		text, err := DebugText(m, req.Params.Arguments["result"], req.Params.Arguments["max_attempts"])
		if err != nil {
			return nil, err
		}
		return mcp.NewGetPromptResult("Fix the failed run", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text)),
		}), nil
	})
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// DebugText renders the debugging prompt for a failed result. A missing or
// malformed argument is an *ArgumentError.
func DebugText(m *manifest.Manifest, resultJSON, maxAttempts string) (string, error) {
	bad := func(arg, problem string, a ...any) (string, error) {
		return "", &ArgumentError{DebugName, arg, fmt.Sprintf(problem, a...)}
	}
	attempts := 3
	if maxAttempts != "" {
		n, err := strconv.Atoi(maxAttempts)
		if err != nil || n < 1 || n > 10 {
			return bad("max_attempts", "must be a whole number from 1 to 10, not %q", maxAttempts)
		}
		attempts = n
	}
	const want = "(pass run_code's structuredContent of the failed run, as JSON)"
	if strings.TrimSpace(resultJSON) == "" {
		return bad("result", "is required %s", want)
	}
	var r contract.Result
	if err := json.Unmarshal([]byte(resultJSON), &r); err != nil {
		return bad("result", "is not a run_code result in JSON: %v %s", err, want)
	}
	switch {
	case r.Status == contract.StatusOK:
		return bad("result", "is the result of run %s, which succeeded: there is nothing to debug", r.RunID)
	case r.Status == "":
		return bad("result", "is not a run_code result: it has no status %s", want)
	case r.Status != contract.StatusError:
		return bad("result", "is not a run_code result: its status is %q, not error %s", r.Status, want)
	case r.Error == nil || r.Error.Kind == "":
		return bad("result", "is not a run_code result: its status is error but it has no error.kind %s", want)
	}
	e := r.Error
	var b strings.Builder
	fmt.Fprintf(&b, "The %s run %s failed: error.kind is %q", r.Language, r.RunID, e.Kind)
	if e.Type != "" {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	fmt.Fprintf(&b, "%s: %s\nThe sandbox's hint: %s\n\n", e.Where(), e.Message, e.Hint)
	b.WriteString("What to do for this kind of failure:\n")
	b.WriteString(advice(m, e.Kind, e.Limit))
	fmt.Fprintf(&b, `

Then fix and retry, at most %d times:
1. Change only what the error points at; keep the rest of the program.
2. Run the fixed code with run_code and read the new result.
3. If the same error.kind and line come back twice, stop patching: rethink the approach or simplify the program.
4. After %d failed attempts, stop and tell the user what failed, what you tried, and the last error.`, attempts, attempts)
	return b.String(), nil
}

func advice(m *manifest.Manifest, kind contract.Kind, limit contract.Limit) string {
	l := m.Limits
	switch kind {
	case contract.KindSyntax:
		return "- The code did not run at all. Fix the syntax at the line given (a missing bracket or quote is often on the line before)."
	case contract.KindRuntime:
		return "- Read the traceback in stderr from the bottom: error.line is the line of your code involved. Check the values that reach it (print them if unsure)."
	case contract.KindTimeout:
		return fmt.Sprintf("- The run exceeded its wall-clock limit (up to %gs is allowed). Find the slow loop; work on a sample; avoid reading stdin that never comes; never wait on the network (%s).", l.MaxTimeoutSeconds, networkWord(m))
	case contract.KindOOM:
		return fmt.Sprintf("- The program needed more than %s of memory. Process data in chunks, use smaller dtypes, avoid building huge lists or strings.", l.Memory)
	case contract.KindResourceLimit:
		switch limit {
		case "pids":
			return fmt.Sprintf("- Too many processes or threads (at most %d). Use a small fixed pool.", l.Pids)
		case "disk":
			return fmt.Sprintf("- The disk filled up (/workspace %s, /tmp %s). Write less or aggregate.", l.WorkspaceBytes, l.TmpBytes)
		case "busy", "budget":
			return "- Not your code: the server is busy or this session's budget is spent. Wait, or stop and report to the user."
		case "background_runs":
			return fmt.Sprintf("- Not your code: you (or the server) hold the most long runs allowed (%d of yours). Collect finished ones with run_wait or stop one with run_cancel, then run again.", l.MaxBackgroundRunsPerClient)
		}
		return "- A limit of the sandbox was hit; see the hint."
	case contract.KindOutputLimit:
		return fmt.Sprintf("- The program printed more than %s per stream. Print a summary; write big results to a file in /workspace instead.", l.OutputBytes)
	case contract.KindInvalidRequest:
		return "- The arguments were rejected before anything ran. Fix them as the message says."
	case contract.KindSandbox:
		return "- The sandbox failed, not your code. Retry once; if it fails again, tell the user the sandbox is unavailable."
	case contract.KindForbiddenNetwork:
		return "- The program tried to reach a host the sandbox does not allow (error.message names it). " + networkAdvice(m)
	case contract.KindSessionLost:
		return "- The session's interpreter is gone and its state with it. Open a new session with session_open and run the set-up code (imports, loading data) again before retrying."
	case contract.KindSessionNotFound:
		return "- The session_id names no open session of yours (closed, expired or mistyped). Use session_list, or open a new session."
	case contract.KindWorkspaceBusy:
		return "- Another open session holds that workspace (one at a time). Use that session (session_list), close it, or name another workspace."
	case contract.KindCheckpointNotFound:
		return "- The checkpoint id names no checkpoint of yours (mistyped, expired, or evicted by the caps). Checkpoint the session again with session_checkpoint."
	case contract.KindCheckpointInvalid:
		return "- The checkpoint failed its integrity check and was refused; it will never run. Rebuild the state from the cells in a new session."
	case contract.KindForbiddenSyscall:
		return "- The program made a system call the sandbox forbids. Do not use low-level system features (ptrace, mounts, namespaces, raw sockets)."
	}
	return "- Read the message and the hint."
}

// networkAdvice says what the program may reach.
func networkAdvice(m *manifest.Manifest) string {
	if !m.Network.Enabled() {
		return "There is no network and nothing can be installed: use only the installed packages listed above."
	}
	eps := make([]string, len(m.Network.Allow))
	for i, e := range m.Network.Allow {
		eps[i] = e.String()
	}
	if x := m.Network.Index; x.Python != "" || x.NPM != "" {
		var tools []string
		if x.Python != "" {
			tools = append(tools, "pip install")
		}
		if x.NPM != "" {
			tools = append(tools, "npm install")
		}
		return "The network reaches only these declared endpoints, over HTTP(S) through the proxy the environment names: " + strings.Join(eps, "; ") + ". Any other host is refused: use only those. Packages can be installed from the declared package index only (" + strings.Join(tools, ", ") + ": already configured, no index option needed) and last only as long as the run or session: prefer the installed packages listed above."
	}
	return "The network reaches only these declared endpoints, over HTTP(S) through the proxy the environment names: " + strings.Join(eps, "; ") + ". Any other host is refused: use only those, and the installed packages listed above."
}

func networkWord(m *manifest.Manifest) string {
	if !m.Network.Enabled() {
		return "there is none"
	}
	return "set timeouts on your requests"
}
