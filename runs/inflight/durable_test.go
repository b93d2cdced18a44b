package inflight

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/runstest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// fakeAdopter stands for the runner of a restarted server: it answers
// each adopted run with its job's code as stdout, once released, or a
// lost result for a box it does not know.
type fakeAdopter struct {
	release chan struct{}
	gone    map[string]bool
	mu      sync.Mutex
	adopted []string
	killed  []string
	marked  []string
}

func (a *fakeAdopter) MarkKept(boxID string) {
	a.mu.Lock()
	a.marked = append(a.marked, boxID)
	a.mu.Unlock()
}

func (a *fakeAdopter) Adopt(ctx context.Context, d sandbox.Detached) contract.Result {
	a.mu.Lock()
	a.adopted = append(a.adopted, d.RunID)
	a.mu.Unlock()
	if a.gone[d.BoxID] {
		return contract.Fail(d.Job, contract.RunLost("its sandbox is gone"))
	}
	select {
	case <-a.release:
		code := 0
		return contract.Result{RunID: d.RunID, Status: contract.StatusOK, ExitCode: &code, Stdout: "adopted " + d.BoxID + "\n", Artifacts: []contract.Artifact{}}
	case <-ctx.Done():
		a.mu.Lock()
		a.killed = append(a.killed, d.BoxID)
		a.mu.Unlock()
		return contract.Fail(d.Job, contract.Cancelled())
	}
}

// durableServer is one server process's pipeline over the run store in
// dir: handles answering after within.
func durableServer(t *testing.T, dir string, within time.Duration, r *runstest.Gate, a Adopter) (fixture, func() []auditLine) {
	t.Helper()
	d, _, lines := handleDeps(t, within, 4, 16, r)
	store, err := runstore.Open(dir, runstore.Options{Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	d.reg.Durable(store, a)
	return d, lines
}

// die is what kill -9 does to a server's records: its holds go (the
// kernel drops its locks), its runs are no longer its.
func die(d fixture) {
	h := d.reg
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.runs {
		if hd.release != nil {
			hd.release()
			hd.release = nil
		}
		hd.durable = false // a dead server writes nothing more
	}
}

func sentAll(d fixture, box string) {
	h := d.reg
	h.mu.Lock()
	var hs []*handle
	for _, hd := range h.runs {
		hs = append(hs, hd)
	}
	h.mu.Unlock()
	for _, hd := range hs {
		h.sent(hd, sandbox.Detached{RunID: hd.RunID, BoxID: box, Job: contract.Job{RunID: hd.RunID}})
	}
}

// waitFinished waits for the finished record of d's run id.
func waitFinished(t *testing.T, d fixture, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, ok := d.reg.store.Get(recordRun, id)
		if ok && e.Finished {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the finished run's record was not written")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func records(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return m
}

// The box of a run the store keeps is marked once, as the first record
// naming it is written (Adopter.MarkKept), so that the reaper of a server
// of another state directory leaves it; a short run's box is not.
func TestDurableRunMarksItsBox(t *testing.T) {
	adopter := &fakeAdopter{release: make(chan struct{})}
	r := runstest.NewGate()
	d, _ := durableServer(t, t.TempDir(), 30*time.Millisecond, r, adopter)
	if res := callAs(t, d, "alice", runCode, slowCall); res.Status != contract.StatusRunning {
		t.Fatalf("status %s", res.Status)
	}
	sentAll(d, "box1")
	sentAll(d, "box1") // a second write of the same record
	close(r.Release)
	short, _ := durableServer(t, t.TempDir(), 10*time.Second, r, adopter)
	if res := callAs(t, short, "alice", runCode, slowCall); res.Status != contract.StatusOK {
		t.Fatalf("the short run: %+v", res)
	}
	sentAll(short, "box2")
	adopter.mu.Lock()
	defer adopter.mu.Unlock()
	if !slices.Equal(adopter.marked, []string{"box1"}) {
		t.Fatalf("marked %v, want [box1]", adopter.marked)
	}
}

// A run answered running outlives its server: a new server on the same
// store answers running (adopting it, once), then the adopted run's
// result; the audit line is written once, by the server that handed it.
func TestDurableRunAdoptedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	a, _ := durableServer(t, dir, 30*time.Millisecond, runstest.NewGate(), nil)
	first := callAs(t, a, "alice", runCode, slowCall)
	if first.Status != contract.StatusRunning {
		t.Fatalf("status %s", first.Status)
	}
	sentAll(a, "box1")
	if n := len(records(t, dir)); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
	die(a)

	adopter := &fakeAdopter{release: make(chan struct{})}
	b, linesB := durableServer(t, dir, 30*time.Millisecond, runstest.NewGate(), adopter)
	if res := callAs(t, b, "bob", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 0}); res.Error == nil || res.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("another owner's run_wait = %+v", res)
	}
	for range 2 {
		if res := callAs(t, b, "alice", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 0}); res.Status != contract.StatusRunning || res.RunID != first.RunID {
			t.Fatalf("run_wait of an adopted run = %+v", res)
		}
	}
	close(adopter.release)
	res := callAs(t, b, "alice", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 5})
	if res.Status != contract.StatusOK || res.Stdout != "adopted box1\n" || res.RunID != first.RunID {
		t.Fatalf("result = %+v", res)
	}
	if len(adopter.adopted) != 1 {
		t.Fatalf("adopted %d times", len(adopter.adopted))
	}
	// Collected again: the same answer, no second audit line.
	if again := callAs(t, b, "alice", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 0}); again.Stdout != res.Stdout {
		t.Fatalf("again = %+v", again)
	}
	var mine []auditLine
	for _, l := range linesB() {
		if l.run == first.RunID {
			mine = append(mine, l)
		}
	}
	if len(mine) != 1 || mine[0].background != string(EndWaited) {
		t.Fatalf("audit lines of the adopted run: %+v", mine)
	}
}

// A run that finished in a server that then died answers its stored
// answer, as its own server would have.
func TestDurableFinishedAnswerKept(t *testing.T) {
	dir := t.TempDir()
	r := runstest.NewGate()
	a, _ := durableServer(t, dir, 30*time.Millisecond, r, nil)
	first := callAs(t, a, "local", runCode, slowCall)
	close(r.Release)
	waitFinished(t, a, first.RunID)
	die(a)
	b, lines := durableServer(t, dir, time.Second, runstest.NewGate(), &fakeAdopter{})
	res := callAs(t, b, "local", runWait, map[string]any{"run_id": first.RunID})
	if res.Status != contract.StatusOK || res.Stdout != "done\n" || res.RunID != first.RunID {
		t.Fatalf("stored answer = %+v", res)
	}
	if l := lines(); len(l) != 1 || l[0].background != string(EndWaited) {
		t.Fatalf("audit: %+v", l)
	}
}

// A finished run's record keeps its result, not a rendered answer: a
// restarted server renders the answer when run_wait collects it and
// serves the run's artifacts, displays and cut output again; a finished
// record of another version answers lost, saying why.
func TestDurableResultKeepsItsResources(t *testing.T) {
	dir := t.TempDir()
	r := runstest.NewGate()
	png := []byte("\x89PNG\r\n\x1a\n-figure")
	r.More = func(res *contract.Result) {
		res.Artifacts = []contract.Artifact{{Path: "out/a.txt", SizeBytes: 5, MimeType: "text/plain",
			URI: contract.ArtifactURI(res.RunID, "out/a.txt"), Data: []byte("hello")}}
		res.Displays = []contract.Display{{Index: 0, Source: "show", Mimes: map[string]contract.DisplayMime{
			"image/png": {Bytes: int64(len(png)), URI: contract.DisplayURI(res.RunID, 0, "image.png"), Data: png}}}}
		res.Stdout, res.StdoutBytes = strings.Repeat("x", 40000), 40000
	}
	a, _ := durableServer(t, dir, 30*time.Millisecond, r, nil)
	first := callAs(t, a, "local", runCode, slowCall)
	close(r.Release)
	waitFinished(t, a, first.RunID)
	e, _ := a.reg.store.Get(recordRun, first.RunID)
	var rec runs.Record
	if err := json.Unmarshal(e.Data, &rec); err != nil || rec.Version != runs.RecordVersion || rec.Result == nil {
		t.Fatalf("record: %v %+v", err, rec)
	}
	if bytes.Contains(e.Data, []byte(`"content"`)) {
		t.Fatal("the record keeps a rendered answer")
	}
	die(a)

	b, _ := durableServer(t, dir, time.Second, runstest.NewGate(), &fakeAdopter{})
	store := runs.NewArtifactStore(time.Hour, 1<<20)
	b.reg.artifacts = store
	res := callAs(t, b, "local", runWait, map[string]any{"run_id": first.RunID})
	shown := contract.ForModel(res, b.svc.Manifest.Limits.AnswerChars)
	if res.Status != contract.StatusOK || len(res.Artifacts) != 1 || len(res.Displays) != 1 || shown.StdoutCut == nil || shown.StdoutCut.URI == "" {
		t.Fatalf("collected after a restart: %+v", shown)
	}
	if got, err := store.Get("local", first.RunID, "out/a.txt"); err != nil || string(got.Data) != "hello" {
		t.Fatalf("artifact after a restart: %q %v", got.Data, err)
	}
	if got, err := store.Get("local", first.RunID, runs.DisplayKey(0, "image.png")); err != nil || string(got.Data) != string(png) {
		t.Fatalf("display after a restart: %q %v", got.Data, err)
	}
	if got, err := store.Stream("local", first.RunID, contract.StreamStdout); err != nil || len(got) != 40000 {
		t.Fatalf("stdout after a restart: %d %v", len(got), err)
	}
	if _, err := store.Get("other", first.RunID, "out/a.txt"); err == nil {
		t.Fatal("another client reads the run's artifact")
	}

	// A finished record written by an older runbox (its answer rendered).
	old, _ := json.Marshal(map[string]any{"run_id": "r_old", "owner": "local", "tool": runCode, "language": "python",
		"started": time.Now(), "ended": time.Now(), "answer": map[string]any{"content": []any{}}})
	if err := b.reg.store.Put(runstore.Entry{Kind: recordRun, ID: "r_old", Finished: true, Data: old}); err != nil {
		t.Fatal(err)
	}
	res = callAs(t, b, "local", runWait, map[string]any{"run_id": "r_old"})
	if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, "version") || res.RunID != "r_old" {
		t.Fatalf("an older record: %+v", res)
	}
}

// A record whose box is gone, or whose job never reached a box, answers
// lost at once; run_cancel of an adopted run kills its box.
func TestDurableLostAndCancelled(t *testing.T) {
	dir := t.TempDir()
	a, _ := durableServer(t, dir, 30*time.Millisecond, runstest.NewGate(), nil)
	gone := callAs(t, a, "local", runCode, slowCall)
	sentAll(a, "gonebox")
	unsent := callAs(t, a, "local", runCode, slowCall)
	die(a)
	adopter := &fakeAdopter{release: make(chan struct{}), gone: map[string]bool{"gonebox": true}}
	b, _ := durableServer(t, dir, time.Second, runstest.NewGate(), adopter)
	for _, id := range []string{gone.RunID, unsent.RunID} {
		start := time.Now()
		res := callAs(t, b, "local", runWait, map[string]any{"run_id": id, "wait_seconds": 30})
		if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, "lost") {
			t.Fatalf("lost run = %+v", res)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("a lost run took %v", time.Since(start))
		}
	}

	a2, _ := durableServer(t, t.TempDir(), 30*time.Millisecond, runstest.NewGate(), nil)
	going := callAs(t, a2, "local", runCode, slowCall)
	sentAll(a2, "box2")
	die(a2)
	c, _ := durableServer(t, a2.reg.store.Dir(), time.Second, runstest.NewGate(), adopter)
	res := callAs(t, c, "local", runCancel, map[string]any{"run_id": going.RunID})
	if res.Error == nil || res.Error.Kind != contract.KindSandbox {
		t.Fatalf("cancelled = %+v", res)
	}
	adopter.mu.Lock()
	defer adopter.mu.Unlock()
	if len(adopter.killed) != 1 || adopter.killed[0] != "box2" {
		t.Fatalf("killed %v", adopter.killed)
	}
}

// While the server that runs a run is alive, another server on the same
// state directory reads its record and never adopts it.
func TestDurableRunOfALiveServer(t *testing.T) {
	dir := t.TempDir()
	r := runstest.NewGate()
	a, _ := durableServer(t, dir, 30*time.Millisecond, r, nil)
	first := callAs(t, a, "local", runCode, slowCall)
	sentAll(a, "box1")
	adopter := &fakeAdopter{release: make(chan struct{})}
	b, _ := durableServer(t, dir, 20*time.Second, runstest.NewGate(), adopter)
	if res := callAs(t, b, "local", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 0}); res.Status != contract.StatusRunning {
		t.Fatalf("= %+v", res)
	}
	close(r.Release)
	res := callAs(t, b, "local", runWait, map[string]any{"run_id": first.RunID, "wait_seconds": 10})
	if res.Status != contract.StatusOK || res.Stdout != "done\n" {
		t.Fatalf("= %+v", res)
	}
	if len(adopter.adopted) != 0 {
		t.Fatal("a live server's run was adopted")
	}
}

// A run that ends within the bound writes nothing to the store.
func TestShortRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	r := runstest.NewGate()
	close(r.Release)
	d, _ := durableServer(t, dir, 10*time.Second, r, nil)
	for range 5 {
		if res := callAs(t, d, "local", runCode, slowCall); res.Status != contract.StatusOK {
			t.Fatalf("= %+v", res)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("a short run wrote %v", des)
	}
}

// A call's own bound (How.Within, the client's
// io.runbox/answer_within_seconds): 0 waits for the run's end, a shorter
// one than the manifest's answers running sooner.
func TestCallWithin(t *testing.T) {
	call := func(d fixture, within time.Duration) contract.Result {
		t.Helper()
		raw, _ := json.Marshal(slowCall)
		a := d.reg.Call(context.Background(), d.svc, runs.DecodeCall(raw), How{Tool: runCode, Within: within})
		if a.Running != nil {
			return contract.Result{Status: contract.StatusRunning}
		}
		return a.Result
	}
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 30*time.Millisecond, 4, 16, r)
	time.AfterFunc(300*time.Millisecond, func() { close(r.Release) })
	if res := call(d, 0); res.Status != contract.StatusOK {
		t.Fatalf("within 0 = %s, want the run's result", res.Status)
	}
	r2 := runstest.NewGate()
	defer close(r2.Release)
	d2, _, _ := handleDeps(t, time.Hour, 4, 16, r2)
	start := time.Now()
	if res := call(d2, 50*time.Millisecond); res.Status != contract.StatusRunning {
		t.Fatalf("within 50 ms = %s, want running", res.Status)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the call's bound was not kept")
	}
}

// A task's call is durable from its start: its record, by task id, held
// by its server while it runs, keeps its result once it ended (the only
// copy: nothing stays in memory) and lets a restarted server finish the
// task (AdoptTask): with the stored result of a run that ended, through
// the runner for one still going, lost for one that never began.
func TestDurableTaskRun(t *testing.T) {
	dir := t.TempDir()
	r := runstest.NewGate()
	a, _ := durableServer(t, dir, time.Hour, r, nil)
	done := make(chan contract.Result, 1)
	go func() { done <- callTask(t, a, "local", runCode, "TASK1", slowCall) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := a.reg.store.Get(recordTaskRun, "TASK1"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no record of the task's run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if release, held := a.reg.store.Hold(recordTaskRun, "TASK1"); held {
		release()
		t.Fatal("the running task's record was not held by its server")
	}
	close(r.Release)
	first := <-done
	a.reg.mu.Lock()
	inMemory := len(a.reg.tasks)
	a.reg.mu.Unlock()
	if runID, ok := a.reg.TaskRun("TASK1"); !ok || runID != first.RunID || inMemory != 0 {
		t.Fatalf("the ended task's run: %q %v, %d in memory", runID, ok, inMemory)
	}
	if res, ok := a.reg.TaskResult("TASK1"); !ok || res.Stdout != "done\n" {
		t.Fatalf("the ended task's result: %+v %v", res, ok)
	}

	adopter := &fakeAdopter{release: make(chan struct{})}
	close(adopter.release)
	b, _ := durableServer(t, dir, time.Hour, runstest.NewGate(), adopter)
	if res := b.reg.AdoptTask(context.Background(), "TASK1"); res.Stdout != "done\n" {
		t.Fatalf("the ended task's stored result: %+v", res)
	}
	// A dead server's record of a task still running.
	data, _ := json.Marshal(runs.Record{RunID: "r_2", TaskID: "TASK2", Owner: "local", Tool: runCode, Language: "python", Started: time.Now(),
		Detached: &sandbox.Detached{RunID: "r_2", BoxID: "box9"}})
	if err := b.reg.store.Put(runstore.Entry{Kind: recordTaskRun, ID: "TASK2", Data: data}); err != nil {
		t.Fatal(err)
	}
	if res := b.reg.AdoptTask(context.Background(), "TASK2"); res.Stdout != "adopted box9\n" || res.RunID != "r_2" {
		t.Fatalf("the adopted task: %+v", res)
	}
	if runID, ok := b.reg.TaskRun("TASK2"); !ok || runID != "r_2" {
		t.Fatalf("the adopted task's run: %q %v", runID, ok)
	}
	if res, ok := b.reg.TaskResult("TASK2"); !ok || res.Stdout != "adopted box9\n" {
		t.Fatalf("the adopted task's result: %+v %v", res, ok)
	}
	if res := b.reg.AdoptTask(context.Background(), "NOSUCHTASK"); res.Error == nil || !strings.Contains(res.Error.Message, "lost") {
		t.Fatalf("a task with no record: %+v", res)
	}
	if _, ok := b.reg.TaskRun("NOSUCHTASK"); ok {
		t.Fatal("a task with no record has a run")
	}
}
