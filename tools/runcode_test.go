package tools

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// jobRunner answers every job with its stdin as stdout, after a wall time
// of wall, and keeps the jobs it ran.
type jobRunner struct {
	wall time.Duration
	mu   sync.Mutex
	jobs []contract.Job
}

func (r *jobRunner) Run(_ context.Context, req sandbox.RunRequest) contract.Result {
	job := req.Job
	r.mu.Lock()
	r.jobs = append(r.jobs, job)
	r.mu.Unlock()
	code := 0
	return contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, ExitCode: &code,
		Stdout: job.Stdin, Artifacts: []contract.Artifact{}, Metrics: contract.Metrics{WallMs: r.wall.Milliseconds()}}
}
func (r *jobRunner) Sessions() sandbox.SessionRunner                   { return nil }
func (r *jobRunner) Peek(context.Context, string) (sandbox.Peek, bool) { return sandbox.Peek{}, false }
func (r *jobRunner) Close() error                                      { return nil }

func (r *jobRunner) ran() []contract.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]contract.Job(nil), r.jobs...)
}

// observed counts the results the pipeline reports to its metrics.
type observed struct {
	mu  sync.Mutex
	res []contract.Result
}

func (o *observed) Observe(r contract.Result) {
	o.mu.Lock()
	o.res = append(o.res, r)
	o.mu.Unlock()
}

// pipeline is Deps over r with an audit log that keeps the code, metrics
// and the manifest's budgets; read returns the log's lines.
func pipeline(t *testing.T, m *manifest.Manifest, r sandbox.Runner) (Deps, *observed, func() []audit.Entry) {
	t.Helper()
	m.Audit.Enabled, m.Audit.Path, m.Audit.StoreCode = true, filepath.Join(t.TempDir(), "audit.jsonl"), true
	l, err := audit.Open(m.Audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	obs := &observed{}
	d := Deps{Manifest: m, Runner: r, Audit: l, Transport: "test", Metrics: obs, Budgets: NewBudgets(m.Budgets)}
	return d, obs, func() []audit.Entry {
		t.Helper()
		es, err := audit.Read(m.Audit.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
}

// Deps.Run is the whole pipeline for a call held as a struct: validated,
// run once, counted and audited with who called, the arguments kept as
// replay reads them; a call that fails validation never reaches the
// runner but is answered, counted and audited the same way.
func TestPipeline(t *testing.T) {
	r := &jobRunner{}
	d, obs, read := pipeline(t, manifest.Default(), r)
	roots := []sandbox.HostMount{{Source: t.TempDir(), Target: manifest.RootsDir + "/data", URI: "file:///data"}}
	who := audit.Client{Name: "agent", Version: "1", Session: "mcp-1"}
	timeout := 3.0
	ok := d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "python", Code: "print(input())", Stdin: "hi", TimeoutSeconds: &timeout,
		Files: []InputFile{{Path: "a.txt", Content: "aGk=", Encoding: EncodingBase64}}}, Client: "alice", App: who, Roots: roots})
	if ok.Status != contract.StatusOK || ok.Stdout != "hi" || len(ok.Roots) != 1 || ok.Roots[0].Path != roots[0].Target {
		t.Fatalf("result %+v", ok)
	}
	jobs := r.ran()
	if len(jobs) != 1 || jobs[0].Timeout != 3*time.Second || jobs[0].Language.Name != "python" || string(jobs[0].Files[0].Data) != "hi" {
		t.Fatalf("jobs %+v", jobs)
	}
	bad := d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "cobol", Code: "x"}, Client: "alice", App: who})
	if bad.Error == nil || bad.Error.Kind != contract.KindInvalidRequest || bad.Language != "cobol" || len(r.ran()) != 1 {
		t.Fatalf("an unknown language: %+v, %d jobs", bad.Error, len(r.ran()))
	}
	undecoded := d.Run(context.Background(), DecodeCall([]byte(`{"language":"python","code":5}`)))
	if undecoded.Error == nil || !strings.Contains(undecoded.Error.Message, "code must be a string") || len(r.ran()) != 1 {
		t.Fatalf("arguments of the wrong type: %+v", undecoded.Error)
	}
	if len(obs.res) != 3 {
		t.Fatalf("metrics saw %d results, want 3", len(obs.res))
	}
	es := read()
	if len(es) != 3 {
		t.Fatalf("%d audit lines, want 3", len(es))
	}
	e := es[0]
	if e.RunID != ok.RunID || e.Client.Name != "agent" || e.Client.Principal != "alice" || e.Transport != "test" || e.Limits.TimeoutSeconds != 3 {
		t.Fatalf("audit line %+v", e)
	}
	// A call held as a struct is stored as replay decodes it.
	again := DecodeCall(e.Args)
	if again.Bad != nil || again.Args.Code != "print(input())" || again.Args.Stdin != "hi" || len(again.Args.Files) != 1 || *again.Args.TimeoutSeconds != 3 {
		t.Fatalf("stored arguments %s read back as %+v", e.Args, again)
	}
	if es[1].Error == nil || es[1].Error.Kind != contract.KindInvalidRequest || string(es[2].Args) != `{"language":"python","code":5}` {
		t.Fatalf("refused calls' lines %+v / %s", es[1].Error, es[2].Args)
	}
}

// A client past its budget is refused before anything runs, and its
// refusal is neither counted nor audited; the wall time of its runs is
// charged to its own session only.
func TestPipelineBudget(t *testing.T) {
	m := manifest.Default()
	m.Budgets = manifest.Budgets{RunSeconds: 1}
	r := &jobRunner{wall: 1500 * time.Millisecond}
	d, obs, read := pipeline(t, m, r)
	call := func(session string) contract.Result {
		return d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "bash", Code: "echo"}, App: audit.Client{Session: session}})
	}
	if res := call("a"); res.Status != contract.StatusOK {
		t.Fatalf("first run: %+v", res.Error)
	}
	res := call("a")
	if res.Error == nil || res.Error.Limit != contract.LimitBudget || res.Isolation != m.Isolation {
		t.Fatalf("over budget: %+v", res)
	}
	if res := call("b"); res.Status != contract.StatusOK {
		t.Fatalf("another client was charged: %+v", res.Error)
	}
	if len(r.ran()) != 2 || len(obs.res) != 2 || len(read()) != 2 {
		t.Fatalf("%d runs, %d counted, %d audited: want 2 each", len(r.ran()), len(obs.res), len(read()))
	}
}

// A saved tool calls the pipeline with its snippet and the call's
// arguments as a struct: JSON on stdin and in input.json, no session, the
// caller named in the audit log.
func TestSavedToolRunsThePipeline(t *testing.T) {
	r := &jobRunner{}
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
	jobs := r.ran()
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
	if out, _ := tool.Handler(context.Background(), req); !out.IsError || len(r.ran()) != 1 {
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
	r := &jobRunner{}
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
	if len(res.Roots) != 1 || res.Roots[0].Path != manifest.RootsDir+"/work" || len(r.ran()) != 1 {
		t.Fatalf("roots %+v, %d runs", res.Roots, len(r.ran()))
	}
}

func (*jobRunner) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (*jobRunner) MarkKept(string) {}
