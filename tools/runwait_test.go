package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs/inflight"
	"github.com/runbox-mcp/runbox/runs/runstest"
)

// handleDeps is the pipeline over r with handles answering after within.
func handleDeps(t *testing.T, within time.Duration, perClient, total int, r *runstest.Gate) (Deps, *runstest.Background, func() []auditLine) {
	t.Helper()
	m := manifest.Default()
	m.Limits.AnswerWithinSeconds = within.Seconds()
	m.Limits.MaxBackgroundRunsPerClient, m.Limits.MaxBackgroundRuns = perClient, total
	d, _, read := pipeline(t, m, r)
	bm := runstest.NewBackground()
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

// Through MCP: run_code past the bound answers running, run_wait and
// run_cancel read their arguments and answer the registry's results with
// isError set as the status says. The registry's own logic (owners, caps,
// audit lines, metrics) is tested in runs/inflight.
func TestRunHandleTools(t *testing.T) {
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", RunCodeName, slowCall)
	if first.Status != contract.StatusRunning || first.Running == nil || first.RunID == "" || first.Language != "python" {
		t.Fatalf("first answer %+v", first)
	}
	wait := map[string]any{"run_id": first.RunID, "wait_seconds": 0.05}
	if again := callAs(t, d, "alice", RunWaitName, wait); again.Status != contract.StatusRunning || again.RunID != first.RunID {
		t.Fatalf("run_wait while running: %+v", again)
	}
	if bad := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": first.RunID, "wait_seconds": -1}); bad.Error == nil || bad.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("negative wait: %+v", bad)
	}
	for _, tool := range []string{RunWaitName, RunCancelName} {
		if res := callAs(t, d, "mallory", tool, map[string]any{"run_id": first.RunID}); res.Error == nil || res.Error.Kind != contract.KindInvalidRequest {
			t.Fatalf("%s of another's run: %+v", tool, res)
		}
	}
	res := callAs(t, d, "alice", RunCancelName, map[string]any{"run_id": first.RunID})
	if res.Status != contract.StatusError || res.Error.Kind != contract.KindSandbox || res.RunID != first.RunID || !r.WasStopped(first.RunID) {
		t.Fatalf("run_cancel: %+v", res)
	}
	second := callAs(t, d, "alice", RunCodeName, slowCall)
	close(r.Release)
	if done := callAs(t, d, "alice", RunWaitName, map[string]any{"run_id": second.RunID}); done.Status != contract.StatusOK || done.RunID != second.RunID || done.Stdout != "done\n" {
		t.Fatalf("run_wait at the end: %+v", done)
	}
}

// A task's run stays in the registry, by task id, once it ended: its
// result is the task's, rendered when the task is collected as the call
// answered it.
func TestTaskAnswer(t *testing.T) {
	r := runstest.NewGate()
	close(r.Release)
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
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 30*time.Millisecond, 4, 16, r)
	time.AfterFunc(300*time.Millisecond, func() { close(r.Release) })
	if res := call(d, map[string]any{AnswerWithinMeta: 0.0}); res.Status != contract.StatusOK {
		t.Fatalf("answer_within 0 = %s, want the run's result", res.Status)
	}
	r2 := runstest.NewGate()
	defer close(r2.Release)
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
