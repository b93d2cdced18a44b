package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/internal/runstore"
)

// Tasks in the run store outlive their Tasks (the server process): a new
// one on the same directory finds a task, its owner checked, its result
// kept.
func TestDiskTasksOutliveTheProcess(t *testing.T) {
	dir := t.TempDir()
	open := func() *Tasks {
		s, err := runstore.Open(dir, runstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return New(NewDisk(s), time.Hour)
	}
	a := open()
	task, err := a.Create("alice", "run_code", func() {})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := a.Create("alice", "run_code", func() {})
	a.Complete(done.ID, json.RawMessage(`{"content":[]}`))

	b := open()
	if got, err := b.Get("alice", task.ID); err != nil || got.Status != Working {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := b.Get("bob", task.ID); err != ErrNotFound {
		t.Fatalf("another owner's Get = %v", err)
	}
	if got, _ := b.Get("alice", done.ID); got.Status != Completed || string(got.Result) != `{"content":[]}` {
		t.Fatalf("finished = %+v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.SetCancel(task.ID, cancel)
	if err := b.Cancel("alice", task.ID); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("cancel did not reach the adopted call")
	}
	if got, _ := open().Get("alice", task.ID); got.Status != Cancelled {
		t.Fatalf("after cancel = %+v", got)
	}
	if n := len(NewDisk(mustOpen(t, dir)).List()); n != 2 {
		t.Fatalf("List = %d", n)
	}
}

func mustOpen(t *testing.T, dir string) *runstore.Store {
	s, err := runstore.Open(dir, runstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
