package inflight

import (
	"context"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

// An MCP task's call runs as any call, its run kept by task id rather
// than answered with a handle: its result is the task's, kept once, here
// (in memory, or in the run store's taskrun record), and rendered when the
// client collects the task.

// TaskTTL is an MCP task's time to live: as long as the longest run may
// take, then as long as its run's files are kept.
func TaskTTL(m *manifest.Manifest) time.Duration {
	ttl := m.Limits.MaxTimeout() + m.Artifacts.TTL()
	if ttl <= 0 {
		ttl = time.Hour
	}
	return ttl
}

// beginTask registers the run of task's call, by task id, outside the
// run_wait registry. With a store it is durable at once, so that a
// restarted server finds it by task id.
func (h *Registry) beginTask(owner, tool, task string, c runs.Call) *handle {
	h.sweep()
	hd := &handle{Held: Held{RunID: runs.NewRunID(), Owner: owner, Tool: tool, Language: c.Args.Language, Started: h.now()},
		cancel: func() {}, done: make(chan struct{})}
	hd.taskID, hd.call = task, runs.RecordCall(c)
	h.mu.Lock()
	h.tasks[task] = hd
	h.mu.Unlock()
	h.persist(hd)
	return hd
}

// maxKeptTasks bounds the ended task runs kept in memory (as the task
// layer bounds its tasks); the manifest's kept_results_bytes bounds their
// results' bytes, as it bounds the run store's.
const maxKeptTasks = 1024

// sweepTasksLocked drops the task runs whose task has expired, and the
// oldest ended past maxKeptTasks or past the bytes their results may
// take together.
func (h *Registry) sweepTasksLocked(now time.Time) {
	var ended []*handle
	var bytes int64
	for id, hd := range h.tasks {
		if now.Sub(hd.Started) >= h.taskKeep {
			delete(h.tasks, id)
		} else if !hd.Ended.IsZero() {
			ended = append(ended, hd)
			bytes += resultBytes(hd.Result)
		}
	}
	maxBytes := int64(h.m.Limits.KeptResultsBytes)
	over := func(kept int) bool { return kept > maxKeptTasks || (maxBytes > 0 && bytes > maxBytes) }
	if !over(len(ended)) {
		return
	}
	sortByEnd(ended)
	for i := 0; i < len(ended) && over(len(ended)-i); i++ {
		delete(h.tasks, ended[i].taskID)
		bytes -= resultBytes(ended[i].Result)
	}
}

// resultBytes is about what a kept result holds in memory: its output,
// its artifacts' and displays' data.
func resultBytes(res *contract.Result) int64 {
	if res == nil {
		return 0
	}
	n := int64(len(res.Stdout) + len(res.Stderr))
	for _, a := range res.Artifacts {
		n += int64(len(a.Data))
	}
	for _, d := range res.Displays {
		for _, m := range d.Mimes {
			n += int64(len(m.Data))
		}
	}
	return n
}

// AdoptTask finishes, in a restarted server, the run of an MCP task
// whose server stopped: its stored result, or the adopted run's once it
// ends (cancelling ctx cancels the run), or one saying it is lost. A run
// it finds keeps its result in the store (TaskRun).
func (h *Registry) AdoptTask(ctx context.Context, taskID string) contract.Result {
	lost := func(why string) contract.Result {
		res := contract.Fail(contract.Job{}, contract.RunLost(why))
		res.Isolation = h.m.Isolation
		return res
	}
	if h.store == nil {
		return lost("this server keeps no runs")
	}
	t := time.NewTicker(remotePoll)
	defer t.Stop()
	for {
		rec, ok := h.load(recordTaskRun, taskID)
		if !ok {
			return lost("its server stopped before its run began")
		}
		if !rec.Ended.IsZero() {
			return h.storedResult(rec)
		}
		if release, held := h.store.Hold(recordTaskRun, taskID); held {
			hd := &handle{Held: Held{RunID: rec.RunID, Owner: rec.Owner, Tool: rec.Tool, Language: rec.Language, Started: rec.Started},
				cancel: func() {}, done: make(chan struct{})}
			hd.durable, hd.taskID, hd.call, hd.detached, hd.release = true, taskID, rec.Call, rec.Detached, release
			h.adopt(ctx, hd)
			return *hd.Result
		}
		// A live server runs it still: its record will say the end.
		select {
		case <-ctx.Done():
			return contract.Fail(contract.Job{RunID: rec.RunID}, contract.Cancelled())
		case <-t.C:
		}
	}
}

// TaskRun names the ended run of task taskID's call, whose result is the
// task's: kept in memory, or in the store. ok is false for a task whose
// call ran no run (refused before it, or asking the client first).
func (h *Registry) TaskRun(taskID string) (runID string, ok bool) {
	h.mu.Lock()
	hd, here := h.tasks[taskID]
	if here {
		runID, ok = hd.RunID, !hd.Ended.IsZero()
	}
	h.mu.Unlock()
	if here || h.store == nil {
		return runID, ok
	}
	rec, ok := h.load(recordTaskRun, taskID)
	if !ok || rec.Ended.IsZero() {
		return "", false
	}
	return rec.RunID, true
}

// TaskResult is the result of task taskID's ended run (TaskRun): in
// memory, or read back from the store (its resources kept again for the
// run's owner). ok is false for a result no longer kept.
func (h *Registry) TaskResult(taskID string) (contract.Result, bool) {
	h.mu.Lock()
	hd, here := h.tasks[taskID]
	var res *contract.Result
	if here {
		res = hd.Result
	}
	h.mu.Unlock()
	if res != nil {
		return *res, true
	}
	if h.store == nil {
		return contract.Result{}, false
	}
	rec, ok := h.load(recordTaskRun, taskID)
	if !ok || rec.Ended.IsZero() {
		return contract.Result{}, false
	}
	return h.storedResult(rec), true
}
