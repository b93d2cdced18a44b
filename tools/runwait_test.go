package tools

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs/inflight"
	"github.com/runbox-mcp/runbox/sandbox"
)

// gateRunner runs each job until the test releases it (answering "done")
// or its call's context ends (answering the cancelled result), and says
// which jobs were cancelled.
type gateRunner struct {
	release chan struct{}
	mu      sync.Mutex
	stopped map[string]bool
	// peek, when set, is every run's output so far.
	peek *sandbox.Peek
	// more, when set, adds to every released run's result.
	more func(*contract.Result)
}

func newGateRunner() *gateRunner {
	return &gateRunner{release: make(chan struct{}), stopped: map[string]bool{}}
}

func (r *gateRunner) Run(ctx context.Context, req sandbox.RunRequest) contract.Result {
	job := req.Job
	select {
	case <-r.release:
		code := 0
		res := contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, ExitCode: &code,
			Stdout: "done\n", Artifacts: []contract.Artifact{}, Metrics: contract.Metrics{WallMs: 7}}
		if r.more != nil {
			r.more(&res)
		}
		return res
	case <-ctx.Done():
		r.mu.Lock()
		r.stopped[job.RunID] = true
		r.mu.Unlock()
		return contract.Fail(job, contract.Cancelled())
	}
}
func (r *gateRunner) Sessions() sandbox.SessionRunner { return nil }
func (r *gateRunner) Peek(context.Context, string) (sandbox.Peek, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peek == nil {
		return sandbox.Peek{}, false
	}
	return *r.peek, true
}
func (r *gateRunner) Close() error { return nil }

func (r *gateRunner) wasStopped(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped[id]
}

// handleDeps is the pipeline over r with handles answering after within.
func handleDeps(t *testing.T, within time.Duration, perClient, total int, r *gateRunner) (Deps, *bgMetrics, func() []auditLine) {
	t.Helper()
	m := manifest.Default()
	m.Limits.AnswerWithinSeconds = within.Seconds()
	m.Limits.MaxBackgroundRunsPerClient, m.Limits.MaxBackgroundRuns = perClient, total
	d, _, read := pipeline(t, m, r)
	bm := &bgMetrics{ended: map[string]int{}}
	d.InFlight = inflight.New(d.Service, d.Store, bm)
	t.Cleanup(d.InFlight.Close)
	return d, bm, func() []auditLine {
		var out []auditLine
		for _, e := range read() {
			out = append(out, auditLine{e.RunID, e.Background, e.Error})
		}
		return out
	}
}

type auditLine struct {
	run, background string
	err             any
}

type bgMetrics struct {
	mu    sync.Mutex
	ended map[string]int
	held  int
}

func (b *bgMetrics) BackgroundEnded(e string) { b.mu.Lock(); b.ended[e]++; b.mu.Unlock() }
func (b *bgMetrics) LongRunsHeld(n int)       { b.mu.Lock(); b.held = n; b.mu.Unlock() }
func (b *bgMetrics) get(e string) int         { b.mu.Lock(); defer b.mu.Unlock(); return b.ended[e] }

// callAs calls tool of ds (run_code, run_wait or run_cancel) as client.
func callAs(t *testing.T, d Deps, client, tool string, args map[string]any) contract.Result {
	t.Helper()
	var handler func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	if tool == RunCodeName {
		handler = RunCode(d).Handler
	}
	for _, st := range RunHandleTools(d) {
		if st.Tool.Name == tool {
			handler = st.Handler
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	out, err := handler(WithPrincipal(context.Background(), client), req)
	if err != nil {
		t.Fatal(err)
	}
	var res contract.Result
	b, _ := json.Marshal(out.StructuredContent)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if out.IsError != (res.Status == contract.StatusError) {
		t.Fatalf("isError %v for status %s", out.IsError, res.Status)
	}
	return res
}

var slowCall = map[string]any{"language": "python", "code": "print(1)"}

// A run past the bound answers running with its run_id; run_wait answers
// running again while it goes on, then the result run_code would have
// answered, under the same run_id; its audit line says it was waited.
func TestRunWaitCollectsABackgroundRun(t *testing.T) {
	r := newGateRunner()
	d, bm, lines := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", RunCodeName, slowCall)
	if first.Status != contract.StatusRunning || first.Running == nil || first.RunID == "" || first.Language != "python" {
		t.Fatalf("first answer %+v", first)
	}
	again := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": first.RunID, "wait_seconds": 0.05})
	if again.Status != contract.StatusRunning || again.RunID != first.RunID {
		t.Fatalf("run_wait while running: %+v", again)
	}
	if total, mine := d.InFlight.LongRuns("alice"); total != 1 || mine != 1 {
		t.Fatalf("long runs %d, alice's %d", total, mine)
	}
	close(r.release)
	done := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": first.RunID})
	if done.Status != contract.StatusOK || done.RunID != first.RunID || done.Stdout != "done\n" || done.Running != nil {
		t.Fatalf("run_wait at the end: %+v", done)
	}
	// Asked again (an answer lost on the way), the result is the same.
	if twice := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": first.RunID}); twice.Stdout != "done\n" {
		t.Fatalf("second collection: %+v", twice)
	}
	if total, _ := d.InFlight.LongRuns("alice"); total != 0 {
		t.Fatalf("%d long runs held after the end", total)
	}
	if got := lines(); len(got) != 1 || got[0].run != first.RunID || got[0].background != "waited" {
		t.Fatalf("audit %+v", got)
	}
	if bm.get("waited") != 1 {
		t.Fatalf("metrics %+v", bm.ended)
	}
}

// Another client's run id reads as unknown to run_wait and run_cancel,
// and its run goes on untouched.
func TestRunHandlesAreTheirOwners(t *testing.T) {
	r := newGateRunner()
	d, _, _ := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", RunCodeName, slowCall)
	for _, tool := range []string{RunWaitName, RunCancelName} {
		res := callAs(t, d, "mallory", tool, map[string]any{"run_id": first.RunID})
		if res.Error == nil || res.Error.Kind != contract.KindInvalidRequest || res.RunID != first.RunID {
			t.Fatalf("%s of another's run: %+v", tool, res)
		}
	}
	if r.wasStopped(first.RunID) {
		t.Fatal("another client's run_cancel stopped the run")
	}
	if res := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": "r_NOSUCHRUN"}); res.Error == nil || res.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("unknown id: %+v", res)
	}
}

// A negative wait_seconds is a bad argument.
func TestRunWaitBadWait(t *testing.T) {
	r := newGateRunner()
	defer close(r.release)
	d, _, _ := handleDeps(t, 200*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", RunCodeName, slowCall)
	if bad := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": first.RunID, "wait_seconds": -1}); bad.Error == nil || bad.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("negative wait: %+v", bad)
	}
}

// run_cancel stops the run (its call's context: the runner kills the box)
// and answers its cancelled result; the audit line says cancelled.
func TestRunCancelStopsTheRun(t *testing.T) {
	r := newGateRunner()
	d, bm, lines := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", RunCodeName, slowCall)
	res := callAs(t, d, "alice", RunCancelName, map[string]any{"run_id": first.RunID})
	if res.Status != contract.StatusError || res.Error.Kind != contract.KindSandbox || res.RunID != first.RunID {
		t.Fatalf("%+v", res)
	}
	if !r.wasStopped(first.RunID) {
		t.Fatal("the run was not stopped")
	}
	if got := lines(); len(got) != 1 || got[0].background != "cancelled" {
		t.Fatalf("audit %+v", got)
	}
	if bm.get("cancelled") != 1 {
		t.Fatalf("metrics %+v", bm.ended)
	}
	if total, _ := d.InFlight.LongRuns("alice"); total != 0 {
		t.Fatalf("%d long runs held after cancel", total)
	}
}

// A task's call is never cut by the bound: it answers at its end.
func TestTaskCallIsNotCut(t *testing.T) {
	r := newGateRunner()
	d, _, _ := handleDeps(t, 20*time.Millisecond, 4, 16, r)
	go func() { time.Sleep(300 * time.Millisecond); close(r.release) }()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = RunCodeName, slowCall
	req.Params.Meta = &mcp.Meta{ProgressToken: TaskCallPrefix + "x"}
	out, _ := RunCode(d).Handler(WithPrincipal(context.Background(), "alice"), req)
	if out.IsError || !contains(out.Content[0].(mcp.TextContent).Text, "ok") {
		t.Fatalf("%+v", out)
	}
	if total, _ := d.InFlight.LongRuns("alice"); total != 0 {
		t.Fatalf("the task's long run is still held: %d", total)
	}
}

// A task's run stays in the registry, by task id, once it ended: its
// result is the task's, rendered when the task is collected as the call
// answered it.
func TestTaskAnswer(t *testing.T) {
	r := newGateRunner()
	close(r.release)
	d, _, _ := handleDeps(t, 20*time.Millisecond, 4, 16, r)
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = RunCodeName, slowCall
	req.Params.Meta = &mcp.Meta{ProgressToken: TaskCallPrefix + "T1"}
	out, _ := RunCode(d).Handler(WithPrincipal(context.Background(), "alice"), req)
	runID, ok := d.TaskRun("T1")
	if !ok || !strings.HasPrefix(runID, "r_") {
		t.Fatalf("the task's run: %q %v", runID, ok)
	}
	if _, ok := d.TaskRun("T2"); ok {
		t.Fatal("a task that ran nothing has a run")
	}
	call, _ := json.Marshal(out)
	again, _ := json.Marshal(d.TaskAnswer(context.Background(), "T1", false))
	if string(call) != string(again) {
		t.Fatalf("the task's answer changed:\n%s\n%s", call, again)
	}
	if plain := d.TaskAnswer(context.Background(), "T1", true); plain.StructuredContent != nil {
		t.Fatal("a content-only answer has structured content")
	}
	if lost := d.TaskAnswer(context.Background(), "T2", false); !lost.IsError || !strings.Contains(lost.Content[0].(mcp.TextContent).Text, "no longer kept") {
		t.Fatalf("the answer of a run not kept: %+v", lost)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A client's io.runbox/answer_within_seconds: 0 waits for the run's end
// (today's behaviour), a shorter bound answers running sooner.
func TestAnswerWithinMeta(t *testing.T) {
	call := func(d Deps, meta map[string]any) contract.Result {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = RunCodeName, slowCall
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
		out, _ := RunCode(d).Handler(context.Background(), req)
		var res contract.Result
		b, _ := json.Marshal(out.StructuredContent)
		_ = json.Unmarshal(b, &res)
		return res
	}
	r := newGateRunner()
	d, _, _ := handleDeps(t, 30*time.Millisecond, 4, 16, r)
	time.AfterFunc(300*time.Millisecond, func() { close(r.release) })
	if res := call(d, map[string]any{AnswerWithinMeta: 0.0}); res.Status != contract.StatusOK {
		t.Fatalf("answer_within 0 = %s, want the run's result", res.Status)
	}
	r2 := newGateRunner()
	defer close(r2.release)
	d2, _, _ := handleDeps(t, time.Hour, 4, 16, r2)
	start := time.Now()
	if res := call(d2, map[string]any{AnswerWithinMeta: 0.05}); res.Status != contract.StatusRunning {
		t.Fatalf("answer_within 0.05 = %s, want running", res.Status)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the client's bound was not kept")
	}
	for _, bad := range []any{-1.0, "2", 1e9} {
		if got := answerWithin(mcp.CallToolRequest{Params: mcp.CallToolParams{Meta: &mcp.Meta{AdditionalFields: map[string]any{AnswerWithinMeta: bad}}}}, time.Hour); got != time.Hour {
			t.Errorf("answer_within %v = %v, want the manifest's", bad, got)
		}
	}
}

func (*gateRunner) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (*gateRunner) MarkKept(string) {}
