package runs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs/runstest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// pipeline is a Service over r with an audit log that keeps the code, metrics
// and the manifest's budgets; read returns the log's lines.
func pipeline(t *testing.T, m *manifest.Manifest, r sandbox.Runner) (Service, *runstest.Observed, func() []audit.Entry) {
	t.Helper()
	l, read := runstest.AuditLog(t, m)
	obs := &runstest.Observed{}
	return Service{Manifest: m, Runner: r, Audit: l, Transport: "test", Metrics: obs, Budgets: NewBudgets(m.Budgets)}, obs, read
}

// Service.Run is the whole pipeline for a call held as a struct: validated,
// run once, counted and audited with who called, the arguments kept as
// replay reads them; a call that fails validation never reaches the
// runner but is answered, counted and audited the same way.
func TestPipeline(t *testing.T) {
	r := &runstest.Echo{}
	d, obs, read := pipeline(t, manifest.Default(), r)
	roots := []sandbox.HostMount{{Source: t.TempDir(), Target: manifest.RootsDir + "/data", URI: "file:///data"}}
	who := audit.Client{Name: "agent", Version: "1", Session: "mcp-1"}
	timeout := 3.0
	ok := d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "python", Code: "print(input())", Stdin: "hi", TimeoutSeconds: &timeout,
		Files: []InputFile{{Path: "a.txt", Content: "aGk=", Encoding: EncodingBase64}}}, Client: "alice", App: who, Roots: roots})
	if ok.Status != contract.StatusOK || ok.Stdout != "hi" || len(ok.Roots) != 1 || ok.Roots[0].Path != roots[0].Target {
		t.Fatalf("result %+v", ok)
	}
	jobs := r.Ran()
	if len(jobs) != 1 || jobs[0].Timeout != 3*time.Second || jobs[0].Language.Name != "python" || string(jobs[0].Files[0].Data) != "hi" {
		t.Fatalf("jobs %+v", jobs)
	}
	bad := d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "cobol", Code: "x"}, Client: "alice", App: who})
	if bad.Error == nil || bad.Error.Kind != contract.KindInvalidRequest || bad.Language != "cobol" || len(r.Ran()) != 1 {
		t.Fatalf("an unknown language: %+v, %d jobs", bad.Error, len(r.Ran()))
	}
	undecoded := d.Run(context.Background(), DecodeCall([]byte(`{"language":"python","code":5}`)))
	if undecoded.Error == nil || !strings.Contains(undecoded.Error.Message, "code must be a string") || len(r.Ran()) != 1 {
		t.Fatalf("arguments of the wrong type: %+v", undecoded.Error)
	}
	if len(obs.Results()) != 3 {
		t.Fatalf("metrics saw %d results, want 3", len(obs.Results()))
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
	r := &runstest.Echo{Wall: 1500 * time.Millisecond}
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
	if len(r.Ran()) != 2 || len(obs.Results()) != 2 || len(read()) != 2 {
		t.Fatalf("%d runs, %d counted, %d audited: want 2 each", len(r.Ran()), len(obs.Results()), len(read()))
	}
}

// hold is a long run's record as a test sees it.
type hold struct {
	sent    []sandbox.Detached
	refuse  *contract.ErrorInfo
	kept    []audit.Entry
	keeping bool
}

func (h *hold) OnSent() func(sandbox.Detached) {
	return func(d sandbox.Detached) { h.sent = append(h.sent, d) }
}
func (h *hold) End() *contract.ErrorInfo { return h.refuse }
func (h *hold) Keep(e *audit.Entry) bool {
	if h.keeping {
		h.kept = append(h.kept, *e)
	}
	return h.keeping
}

// sentRunner tells the run's OnSent that the job left, then answers.
type sentRunner struct{ runstest.Echo }

func (r *sentRunner) Run(ctx context.Context, req sandbox.RunRequest) contract.Result {
	if req.OnSent != nil {
		req.OnSent(sandbox.Detached{RunID: req.Job.RunID, BoxID: "box1"})
	}
	return r.Echo.Run(ctx, req)
}

// A call's run id and long run's record are the call's: the run takes the
// id, the record hears the box's record and the run's end (whose refusal is
// the result) and may keep the audit line, which is then not written.
func TestPipelineHold(t *testing.T) {
	d, _, read := pipeline(t, manifest.Default(), &sentRunner{})
	h := &hold{keeping: true}
	res := d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "bash", Code: "echo"}, RunID: "r_mine", Hold: h})
	if res.RunID != "r_mine" || len(h.sent) != 1 || h.sent[0].RunID != "r_mine" || len(h.kept) != 1 || len(read()) != 0 {
		t.Fatalf("result %+v, sent %+v, kept %d, written %d", res, h.sent, len(h.kept), len(read()))
	}
	bad := contract.Invalid("past the cap")
	h = &hold{refuse: &bad}
	res = d.Run(context.Background(), Call{Args: RunCodeArgs{Language: "bash", Code: "echo"}, Hold: h})
	if res.Status != contract.StatusError || res.Error.Message != bad.Message || res.RunID == "" || len(read()) != 1 {
		t.Fatalf("refused at its end: %+v, %d written", res, len(read()))
	}
}

// A runner without sessions answers a session_id with a typed error, not
// a one-off run.
func TestSessionIDWithoutSessions(t *testing.T) {
	m := manifest.Default()
	res := Service{Manifest: m, Runner: runstest.NoRunner{}}.Run(context.Background(), DecodeCall([]byte(`{"language":"python","code":"print(1)","session_id":"s_x"}`)))
	if res.Error == nil || res.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("%+v", res.Error)
	}
}
