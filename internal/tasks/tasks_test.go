package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// clock is a settable time for the tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTasks(ttl time.Duration) (*Tasks, *clock) {
	c := &clock{t: time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)}
	ts := New(NewMemory(100, 1<<20), ttl)
	ts.now = c.now
	return ts, c
}

func TestTransitions(t *testing.T) {
	cases := []struct {
		name   string
		finish func(ts *Tasks, id string)
		status Status
	}{
		{"completed", func(ts *Tasks, id string) { ts.Complete(id, json.RawMessage(`{"isError":false}`)) }, Completed},
		{"completed by a run", func(ts *Tasks, id string) { ts.CompleteRun(id, "r_1", true) }, Completed},
		{"failed", func(ts *Tasks, id string) {
			ts.Fail(id, json.RawMessage(`{"code":-32603,"message":"boom"}`), "boom")
		}, Failed},
		{"cancelled", func(ts *Tasks, id string) {
			if err := ts.Cancel("alice", id); err != nil {
				t.Fatal(err)
			}
		}, Cancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, clk := newTasks(time.Hour)
			ctx, cancel := context.WithCancel(context.Background())
			task, err := ts.Create("alice", "run_code", cancel)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != Working || len(task.ID) < 26 {
				t.Fatalf("created %+v", task)
			}
			got, err := ts.Get("alice", task.ID)
			if err != nil || got.Status != Working {
				t.Fatalf("get after create: %+v %v", got, err)
			}
			ts.Progress(task.ID, "running for 2 s")
			if got, _ = ts.Get("alice", task.ID); got.Message != "running for 2 s" {
				t.Fatalf("progress: %+v", got)
			}
			clk.t = clk.t.Add(time.Second)
			c.finish(ts, task.ID)
			got, err = ts.Get("alice", task.ID)
			if err != nil || got.Status != c.status || !got.Updated.After(got.Created) {
				t.Fatalf("finished: %+v %v", got, err)
			}
			if ctx.Err() == nil {
				t.Error("a finished task's call was not released")
			}
			// Terminal is terminal: nothing moves it again.
			ts.Complete(task.ID, json.RawMessage(`{"late":true}`))
			ts.Fail(task.ID, json.RawMessage(`{}`), "late")
			ts.Progress(task.ID, "late")
			if err := ts.Cancel("alice", task.ID); err != nil {
				t.Fatalf("cancel of a finished task: %v", err)
			}
			again, _ := ts.Get("alice", task.ID)
			if again.Status != c.status || string(again.Result) != string(got.Result) || again.Message != got.Message || again.RunID != got.RunID {
				t.Fatalf("a finished task changed: %+v -> %+v", got, again)
			}
			if ts.Running() != 0 {
				t.Errorf("running %d", ts.Running())
			}
		})
	}
}

// A task completed by a run keeps the run's name, not its result: the
// run registry keeps that.
func TestTaskOfARun(t *testing.T) {
	ts, _ := newTasks(time.Hour)
	task, _ := ts.Create("local", "run_code", func() {})
	ts.CompleteRun(task.ID, "r_7", true)
	got, err := ts.Get("local", task.ID)
	if err != nil || got.Status != Completed || got.RunID != "r_7" || !got.ContentOnly || got.Result != nil {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestResultOfFailedTask(t *testing.T) {
	ts, _ := newTasks(time.Hour)
	task, _ := ts.Create("local", "run_code", func() {})
	ts.Fail(task.ID, json.RawMessage(`{"code":-32602,"message":"bad arguments"}`), "bad arguments")
	got, err := ts.Get("local", task.ID)
	if err != nil || got.Status != Failed || string(got.Error) != `{"code":-32602,"message":"bad arguments"}` || got.Result != nil {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestOwnerIsolation(t *testing.T) {
	ts, _ := newTasks(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	task, _ := ts.Create("alice", "run_code", cancel)
	if _, err := ts.Get("bob", task.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob got alice's task: %v", err)
	}
	if err := ts.Cancel("bob", task.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob cancelled alice's task: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("bob's cancel reached alice's call")
	}
	// Not found, the same error as a task that never was.
	_, missing := ts.Get("bob", NewID())
	_, other := ts.Get("bob", task.ID)
	if missing.Error() != other.Error() {
		t.Fatalf("another's task %q reads unlike a missing one %q", other, missing)
	}
	if got, err := ts.Get("alice", task.ID); err != nil || got.Status != Working {
		t.Fatalf("alice: %+v %v", got, err)
	}
}

func TestTTL(t *testing.T) {
	ts, clk := newTasks(time.Minute)
	runCtx, cancelRun := context.WithCancel(context.Background())
	running, _ := ts.Create("alice", "run_code", cancelRun)
	done, _ := ts.Create("alice", "run_code", func() {})
	ts.Complete(done.ID, json.RawMessage(`{}`))
	clk.t = clk.t.Add(59 * time.Second)
	if _, err := ts.Get("alice", done.ID); err != nil {
		t.Fatalf("before its ttl: %v", err)
	}
	clk.t = clk.t.Add(time.Second)
	if _, err := ts.Get("alice", done.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after its ttl: %v", err)
	}
	ts.Sweep()
	if _, ok := ts.store.Get(running.ID); ok {
		t.Fatal("an expired working task was kept")
	}
	if runCtx.Err() == nil {
		t.Fatal("an expired working task's call goes on")
	}
	if n := len(ts.store.List()); n != 0 {
		t.Fatalf("%d tasks left", n)
	}
}

func TestIDsAreUnguessable(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if len(id) < 26 || seen[id] {
			t.Fatalf("id %q (128 random bits are 26 base32 characters)", id)
		}
		seen[id] = true
	}
}

func TestMemoryBounds(t *testing.T) {
	m := NewMemory(2, 1<<20)
	now := time.Now()
	put := func(id string, s Status, at time.Duration) error {
		return m.Put(Task{ID: id, Status: s, Updated: now.Add(at)})
	}
	if err := put("a", Completed, 1); err != nil {
		t.Fatal(err)
	}
	if err := put("b", Working, 2); err != nil {
		t.Fatal(err)
	}
	// Full: the finished task goes, the working one stays.
	if err := put("c", Working, 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("a"); ok {
		t.Fatal("the oldest finished task was kept")
	}
	if err := put("d", Working, 4); !errors.Is(err, ErrFull) {
		t.Fatalf("two working tasks in a store of two, a third: %v", err)
	}
	// Bytes: a result larger than the store fails as full, nothing lost.
	m = NewMemory(10, 1000)
	if err := m.Put(Task{ID: "x", Status: Working}); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(Task{ID: "x", Status: Completed, Result: make(json.RawMessage, 2000)}); !errors.Is(err, ErrFull) {
		t.Fatalf("oversized result: %v", err)
	}
	if got, ok := m.Get("x"); !ok || got.Status != Working {
		t.Fatalf("the task was lost: %+v", got)
	}
}

func TestOversizedResultFailsTheTask(t *testing.T) {
	ts := New(NewMemory(10, 4096), time.Hour)
	task, _ := ts.Create("alice", "run_code", func() {})
	ts.Complete(task.ID, make(json.RawMessage, 8192))
	got, err := ts.Get("alice", task.ID)
	if err != nil || got.Status != Failed || got.Result != nil || len(got.Error) == 0 {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestInputRequired(t *testing.T) {
	ts, _ := newTasks(time.Hour)
	task, _ := ts.Create("alice", "run_code", nil)
	ts.SetCancel(task.ID, func() {})
	ts.NeedInput(task.ID, json.RawMessage(`{"q":{"method":"elicitation/create"}}`), json.RawMessage(`"st"`))
	got, _ := ts.Get("alice", task.ID)
	if got.Status != InputRequired || string(got.InputRequests) != `{"q":{"method":"elicitation/create"}}` {
		t.Fatalf("%+v", got)
	}
	if _, _, err := ts.Resume("bob", task.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob resumed alice's task: %v", err)
	}
	was, ok, err := ts.Resume("alice", task.ID)
	if err != nil || !ok || string(was.RequestState) != `"st"` {
		t.Fatalf("resume: %+v %v %v", was, ok, err)
	}
	if got, _ = ts.Get("alice", task.ID); got.Status != Working || got.InputRequests != nil {
		t.Fatalf("resumed: %+v", got)
	}
	if _, ok, _ := ts.Resume("alice", task.ID); ok {
		t.Fatal("a working task resumed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.SetCancel(task.ID, cancel)
	ts.Complete(task.ID, json.RawMessage(`{}`))
	if ctx.Err() == nil {
		t.Fatal("the resumed call's cancel was not released")
	}
	// A cancel set after the end is called at once.
	late, lateCancel := context.WithCancel(context.Background())
	ts.SetCancel(task.ID, lateCancel)
	if late.Err() == nil || ts.Running() != 0 {
		t.Fatal("a finished task kept a cancel")
	}
}
