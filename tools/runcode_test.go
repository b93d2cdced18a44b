package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/runstest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// pipeline is Deps over r with an audit log that keeps the code, metrics
// and the manifest's budgets; read returns the log's lines.
func pipeline(t *testing.T, m *manifest.Manifest, r sandbox.Runner) (Deps, *runstest.Observed, func() []audit.Entry) {
	t.Helper()
	l, read := runstest.AuditLog(t, m)
	obs := &runstest.Observed{}
	return Deps{Service: runs.Service{Manifest: m, Runner: r, Audit: l, Transport: "test", Metrics: obs, Budgets: runs.NewBudgets(m.Budgets)}}, obs, read
}

// A saved tool calls the pipeline with its snippet and the call's
// arguments as a struct: JSON on stdin and in input.json, no session, the
// caller named in the audit log.
func TestSavedToolRunsThePipeline(t *testing.T) {
	r := &runstest.Echo{}
	d, _, read := pipeline(t, manifest.Default(), r)
	tool := savedTool(SavedTool{Name: "double", Description: "Doubles n.", Language: "python", Code: "print(2*n)", Version: 1}, d)
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "double", map[string]any{"n": 21}
	out, err := tool.Handler(WithPrincipal(context.Background(), "bob"), req)
	if err != nil || out.IsError {
		t.Fatalf("%v %+v", err, out)
	}
	res, ok := out.StructuredContent.(contract.Result)
	if !ok || res.Stdout != `{"n":21}` {
		t.Fatalf("answer %+v", out.StructuredContent)
	}
	jobs := r.Ran()
	if len(jobs) != 1 || jobs[0].Code != "print(2*n)" || jobs[0].Stdin != `{"n":21}` || len(jobs[0].Files) != 1 ||
		jobs[0].Files[0].Path != "input.json" || string(jobs[0].Files[0].Data) != `{"n":21}` {
		t.Fatalf("jobs %+v", jobs)
	}
	es := read()
	if len(es) != 1 || es[0].Client.Principal != "bob" || es[0].RunID != res.RunID {
		t.Fatalf("audit %+v", es)
	}
	var args RunCodeArgs
	if err := json.Unmarshal(es[0].Args, &args); err != nil || args.Code != "print(2*n)" || args.Stdin != `{"n":21}` {
		t.Fatalf("stored arguments %s: %v", es[0].Args, err)
	}
	req.Params.Arguments = []any{1}
	if out, _ := tool.Handler(context.Background(), req); !out.IsError || len(r.Ran()) != 1 {
		t.Fatalf("arguments that are not an object ran: %+v", out)
	}
}

// A saved tool's call that answers the roots it was asked for runs with
// them: the answers are the saved tool's own request's, which the
// pipeline reads (re-entering run_code through a new request dropped them,
// so a client with roots was asked again on every round).
func TestSavedToolTakesItsInputResponses(t *testing.T) {
	dir := t.TempDir()
	m := manifest.Default()
	m.Roots = manifest.Roots{Mount: true, Under: []string{dir}}
	r := &runstest.Echo{}
	d, _, _ := pipeline(t, m, r)
	tool := savedTool(SavedTool{Name: "ls", Description: "Lists.", Language: "bash", Code: "ls /mnt/roots", Version: 1}, d)
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "ls", map[string]any{}
	req.Params.InputResponses = mcp.InputResponses{rootsInput: {Roots: &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file://" + dir, Name: "work"}}}}}
	out, err := tool.Handler(context.Background(), req)
	if err != nil || out.IsError || len(out.InputRequests) > 0 {
		t.Fatalf("%v %+v", err, out)
	}
	res := out.StructuredContent.(contract.Result)
	if len(res.Roots) != 1 || res.Roots[0].Path != manifest.RootsDir+"/work" || len(r.Ran()) != 1 {
		t.Fatalf("roots %+v, %d runs", res.Roots, len(r.Ran()))
	}
}
