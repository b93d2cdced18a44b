package inflight

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/runstest"
)

// fixture is a server's pipeline over a runstest.Gate and its registry.
type fixture struct {
	reg *Registry
	svc runs.Service
}

// handleDeps is the pipeline over r with a registry answering after
// within.
func handleDeps(t *testing.T, within time.Duration, perClient, total int, r *runstest.Gate) (fixture, *runstest.Background, func() []auditLine) {
	t.Helper()
	m := manifest.Default()
	m.Limits.AnswerWithinSeconds = within.Seconds()
	m.Limits.MaxBackgroundRunsPerClient, m.Limits.MaxBackgroundRuns = perClient, total
	l, read := runstest.AuditLog(t, m)
	svc := runs.Service{Manifest: m, Runner: r, Audit: l, Transport: "test", Metrics: &runstest.Observed{}, Budgets: runs.NewBudgets(m.Budgets)}
	bm := runstest.NewBackground()
	reg := New(svc, nil, bm)
	t.Cleanup(reg.Close)
	return fixture{reg: reg, svc: svc}, bm, func() []auditLine {
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

// The tools whose calls the tests make, as the MCP layer (tools) makes
// them through the registry.
const (
	runCode   = contract.ToolRunCode
	runWait   = contract.ToolRunWait
	runCancel = contract.ToolRunCancel
)

// callAs makes client's call of tool (run_code, run_wait or run_cancel)
// through d's registry, as the MCP layer does, and returns its answer's
// result: a run still going answers status running.
func callAs(t *testing.T, d fixture, client, tool string, args map[string]any) contract.Result {
	t.Helper()
	return callTask(t, d, client, tool, "", args)
}

// callTask is callAs of a call made as MCP task task ("" for none).
func callTask(t *testing.T, d fixture, client, tool, task string, args map[string]any) contract.Result {
	t.Helper()
	running := func(run Held) contract.Result {
		return contract.Result{RunID: run.RunID, Language: run.Language, Status: contract.StatusRunning,
			Running: contract.StillRunning(time.Since(run.Started), runWait), Artifacts: []contract.Artifact{}}
	}
	ctx := context.Background()
	if tool == runCode {
		raw, _ := json.Marshal(args)
		c := runs.DecodeCall(raw)
		c.Client = client
		a := d.reg.Call(ctx, d.svc, c, How{Tool: tool, Task: task, Within: d.reg.Within()})
		if a.Running != nil {
			return running(*a.Running)
		}
		return a.Result
	}
	id, _ := args["run_id"].(string)
	var out *contract.Result
	var run Held
	var ok bool
	if tool == runWait {
		wait := d.reg.Within()
		if s, set := args["wait_seconds"].(float64); set {
			wait = min(wait, time.Duration(s*float64(time.Second)))
		}
		if s, set := args["wait_seconds"].(int); set {
			wait = min(wait, time.Duration(s)*time.Second)
		}
		out, run, ok = d.reg.Wait(ctx, client, id, wait)
	} else {
		out, run, ok = d.reg.Cancel(ctx, client, id)
	}
	switch {
	case !ok:
		return contract.Fail(contract.Job{RunID: id}, contract.UnknownRun(id))
	case out == nil:
		return running(run)
	}
	return *out
}

var slowCall = map[string]any{"language": "python", "code": "print(1)"}

// A run past the bound answers running with its run_id; run_wait answers
// running again while it goes on, then the result run_code would have
// answered, under the same run_id; its audit line says it was waited.
func TestRunWaitCollectsABackgroundRun(t *testing.T) {
	r := runstest.NewGate()
	d, bm, lines := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", runCode, slowCall)
	if first.Status != contract.StatusRunning || first.Running == nil || first.RunID == "" || first.Language != "python" {
		t.Fatalf("first answer %+v", first)
	}
	again := callAs(t, d, "alice", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 0.05})
	if again.Status != contract.StatusRunning || again.RunID != first.RunID {
		t.Fatalf("run_wait while running: %+v", again)
	}
	if total, mine := d.reg.LongRuns("alice"); total != 1 || mine != 1 {
		t.Fatalf("long runs %d, alice's %d", total, mine)
	}
	close(r.Release)
	done := callAs(t, d, "alice", runWait, map[string]any{"run_id": first.RunID})
	if done.Status != contract.StatusOK || done.RunID != first.RunID || done.Stdout != "done\n" || done.Running != nil {
		t.Fatalf("run_wait at the end: %+v", done)
	}
	// Asked again (an answer lost on the way), the result is the same.
	if twice := callAs(t, d, "alice", runWait, map[string]any{"run_id": first.RunID}); twice.Stdout != "done\n" {
		t.Fatalf("second collection: %+v", twice)
	}
	if total, _ := d.reg.LongRuns("alice"); total != 0 {
		t.Fatalf("%d long runs held after the end", total)
	}
	if got := lines(); len(got) != 1 || got[0].run != first.RunID || got[0].background != "waited" {
		t.Fatalf("audit %+v", got)
	}
	if bm.Ended("waited") != 1 {
		t.Fatalf("metrics %v", bm)
	}
}

// A run that ends within the bound answers as it always did: no handle,
// no background line.
func TestShortRunAnswersAsBefore(t *testing.T) {
	r := runstest.NewGate()
	close(r.Release)
	d, _, lines := handleDeps(t, 10*time.Second, 4, 16, r)
	res := callAs(t, d, "alice", runCode, slowCall)
	if res.Status != contract.StatusOK || res.Stdout != "done\n" {
		t.Fatalf("%+v", res)
	}
	if u := callAs(t, d, "alice", runWait, map[string]any{"run_id": res.RunID}); u.Error == nil || u.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("a foreground run has no handle: %+v", u)
	}
	if got := lines(); len(got) != 1 || got[0].background != "" || got[0].run != res.RunID {
		t.Fatalf("audit %+v", got)
	}
}

// Another client's run id reads as unknown to run_wait and run_cancel,
// and its run goes on untouched.
func TestRunHandlesAreTheirOwners(t *testing.T) {
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", runCode, slowCall)
	for _, tool := range []string{runWait, runCancel} {
		res := callAs(t, d, "mallory", tool, map[string]any{"run_id": first.RunID})
		if res.Error == nil || res.Error.Kind != contract.KindInvalidRequest || res.RunID != first.RunID {
			t.Fatalf("%s of another's run: %+v", tool, res)
		}
	}
	if r.WasStopped(first.RunID) {
		t.Fatal("another client's run_cancel stopped the run")
	}
	if res := callAs(t, d, "alice", runWait, map[string]any{"run_id": "r_NOSUCHRUN"}); res.Error == nil || res.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("unknown id: %+v", res)
	}
}

// run_wait waits at most the server's bound, whatever it asks.
func TestRunWaitIsBounded(t *testing.T) {
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 200*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", runCode, slowCall)
	start := time.Now()
	res := callAs(t, d, "alice", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 3600})
	if res.Status != contract.StatusRunning {
		t.Fatalf("%+v", res)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("run_wait of 3600 s waited %v: the bound is 200 ms", took)
	}
}

// run_cancel stops the run (its call's context: the runner kills the box)
// and answers its cancelled result; the audit line says cancelled.
func TestRunCancelStopsTheRun(t *testing.T) {
	r := runstest.NewGate()
	d, bm, lines := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	first := callAs(t, d, "alice", runCode, slowCall)
	res := callAs(t, d, "alice", runCancel, map[string]any{"run_id": first.RunID})
	if res.Status != contract.StatusError || res.Error.Kind != contract.KindSandbox || res.RunID != first.RunID {
		t.Fatalf("%+v", res)
	}
	if !r.WasStopped(first.RunID) {
		t.Fatal("the run was not stopped")
	}
	if got := lines(); len(got) != 1 || got[0].background != "cancelled" {
		t.Fatalf("audit %+v", got)
	}
	if bm.Ended("cancelled") != 1 {
		t.Fatalf("metrics %v", bm)
	}
	if total, _ := d.reg.LongRuns("alice"); total != 0 {
		t.Fatalf("%d long runs held after cancel", total)
	}
}

// Past a client's cap, or the server's, a run that would go to the
// background is stopped and refused with resource_limit/background_runs,
// naming the cap; a task's call takes a long run from its start.
func TestLongRunCaps(t *testing.T) {
	r := runstest.NewGate()
	d, _, lines := handleDeps(t, 50*time.Millisecond, 1, 2, r)
	if a := callAs(t, d, "alice", runCode, slowCall); a.Status != contract.StatusRunning {
		t.Fatalf("alice's first: %+v", a)
	}
	refused := callAs(t, d, "alice", runCode, slowCall)
	if e := refused.Error; e == nil || e.Kind != contract.KindResourceLimit || e.Limit != contract.LimitBackgroundRuns ||
		!contains(e.Message, "max_background_runs_per_client") {
		t.Fatalf("alice past her cap: %+v", refused)
	}
	if !r.WasStopped(refused.RunID) {
		t.Fatal("the refused run goes on")
	}
	// It is counted as what it answered.
	deadline := time.Now().Add(20 * time.Second)
	for counted := false; !counted; {
		obs := d.svc.Metrics.(*runstest.Observed)
		for _, res := range obs.Results() {
			if res.RunID == refused.RunID {
				counted = true
				if res.Error == nil || res.Error.Limit != contract.LimitBackgroundRuns {
					t.Errorf("the refused run counted as %+v", res.Error)
				}
			}
		}
		if !counted && time.Now().After(deadline) {
			t.Fatal("the refused run was never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b := callAs(t, d, "bob", runCode, slowCall); b.Status != contract.StatusRunning {
		t.Fatalf("bob's first: %+v", b)
	}
	// A task's call of carol's: the server holds 2 already.
	task := callTask(t, d, "carol", runCode, "x", slowCall)
	if e := task.Error; e == nil || e.Limit != contract.LimitBackgroundRuns || !contains(e.Message, "limits.max_background_runs)") {
		t.Fatalf("a task past the server's cap: %+v", task)
	}
	found := false
	for _, l := range lines() {
		if l.run == refused.RunID {
			found = true
			if e, _ := json.Marshal(l.err); !contains(string(e), "background_runs") {
				t.Fatalf("the refused run's audit line: %s", e)
			}
		}
	}
	if !found {
		t.Fatal("the refused run has no audit line")
	}
}

// A task's call is never cut by the bound: it answers at its end.
func TestTaskCallIsNotCut(t *testing.T) {
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 20*time.Millisecond, 4, 16, r)
	go func() { time.Sleep(300 * time.Millisecond); close(r.Release) }()
	if res := callTask(t, d, "alice", runCode, "x", slowCall); res.Status != contract.StatusOK {
		t.Fatalf("%+v", res)
	}
	if total, _ := d.reg.LongRuns("alice"); total != 0 {
		t.Fatalf("the task's long run is still held: %d", total)
	}
}

// A task's run stays in the registry, by task id, once it ended: its
// result is the task's, the only copy; it goes once the task has expired.
func TestTaskRunKeepsTheTasksResult(t *testing.T) {
	r := runstest.NewGate()
	close(r.Release)
	d, _, _ := handleDeps(t, 20*time.Millisecond, 4, 16, r)
	res := callTask(t, d, "alice", runCode, "T1", slowCall)
	runID, ok := d.reg.TaskRun("T1")
	if !ok || runID != res.RunID {
		t.Fatalf("the task's run: %q %v, the call's %s", runID, ok, res.RunID)
	}
	if _, ok := d.reg.TaskRun("T2"); ok {
		t.Fatal("a task that ran nothing has a run")
	}
	if kept, ok := d.reg.TaskResult("T1"); !ok || kept.RunID != res.RunID || kept.Stdout != res.Stdout {
		t.Fatalf("the task's result: %+v %v", kept, ok)
	}
	if _, ok := d.reg.TaskResult("T2"); ok {
		t.Fatal("a task that ran nothing has a result")
	}
	h := d.reg
	h.now = func() time.Time { return time.Now().Add(h.taskKeep) }
	h.sweep()
	if _, ok := d.reg.TaskRun("T1"); ok {
		t.Fatal("the run of an expired task is kept")
	}
}

// Past maxKeptTasks, the oldest ended task runs go first.
func TestTaskRunsBounded(t *testing.T) {
	r := runstest.NewGate()
	close(r.Release)
	d, _, _ := handleDeps(t, 20*time.Millisecond, 4, 16, r)
	h := d.reg
	base := time.Now()
	h.mu.Lock()
	for i := range maxKeptTasks + 2 {
		id := fmt.Sprintf("T%d", i)
		h.tasks[id] = &handle{Held: Held{RunID: "r_" + id, Started: base, Ended: base.Add(time.Duration(i) * time.Millisecond)}, keeping: keeping{taskID: id}}
	}
	h.mu.Unlock()
	h.sweep()
	for id, want := range map[string]bool{"T0": false, "T1": false, "T2": true, fmt.Sprintf("T%d", maxKeptTasks+1): true} {
		if _, ok := h.TaskRun(id); ok != want {
			t.Errorf("task %s kept: %v, want %v", id, ok, want)
		}
	}
}

// Past kept_results_bytes, the oldest ended task runs go first, whatever
// their count.
func TestTaskRunsBoundedInBytes(t *testing.T) {
	r := runstest.NewGate()
	close(r.Release)
	d, _, _ := handleDeps(t, 20*time.Millisecond, 4, 16, r)
	h := d.reg
	h.m.Limits.KeptResultsBytes = 10 << 20
	base := time.Now()
	h.mu.Lock()
	for i := range 4 {
		id := fmt.Sprintf("T%d", i)
		res := &contract.Result{Stdout: strings.Repeat("x", 2<<20),
			Artifacts: []contract.Artifact{{Path: "a.bin", Data: make([]byte, 2<<20)}}}
		h.tasks[id] = &handle{Held: Held{RunID: "r_" + id, Started: base, Ended: base.Add(time.Duration(i) * time.Millisecond), Result: res},
			keeping: keeping{taskID: id}}
	}
	h.mu.Unlock()
	h.sweep()
	for id, want := range map[string]bool{"T0": false, "T1": false, "T2": true, "T3": true} {
		if _, ok := h.TaskResult(id); ok != want {
			t.Errorf("task %s kept: %v, want %v", id, ok, want)
		}
	}
}

// A finished run nobody collects is dropped after its keeping time, and
// its audit line says abandoned; so are those left when the server stops.
func TestAbandonedRuns(t *testing.T) {
	r := runstest.NewGate()
	d, bm, lines := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	d.reg.keep = 0
	first := callAs(t, d, "alice", runCode, slowCall)
	close(r.Release)
	deadline := time.Now().Add(20 * time.Second)
	for bm.Ended("abandoned") == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		d.reg.sweep()
	}
	if got := lines(); len(got) != 1 || got[0].run != first.RunID || got[0].background != "abandoned" {
		t.Fatalf("audit %+v", got)
	}
	if res := callAs(t, d, "alice", runWait, map[string]any{"run_id": first.RunID}); res.Error == nil {
		t.Fatalf("an abandoned run's result is still served: %+v", res)
	}

	r2 := runstest.NewGate()
	d2, _, lines2 := handleDeps(t, 50*time.Millisecond, 4, 16, r2)
	second := callAs(t, d2, "alice", runCode, slowCall)
	d2.reg.Close()
	for time.Now().Before(deadline) && len(lines2()) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if !r2.WasStopped(second.RunID) {
		t.Fatal("a background run goes on after Close")
	}
	if got := lines2(); len(got) != 1 || got[0].background != "abandoned" {
		t.Fatalf("audit after Close %+v", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
