package tasks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// ErrNotFound is a task that does not exist, has expired, or belongs to
// another owner: the three are told apart nowhere outside this package,
// so a task id says nothing to anyone but its owner.
var ErrNotFound = errors.New("task not found")

// Tasks is the state machine over a Store: it creates tasks, moves them
// from working to one terminal status exactly once, checks the owner on
// every look-up and cancels the call of a task cancelled or expired.
type Tasks struct {
	store Store
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	cancels map[string]context.CancelFunc
}

// New returns tasks kept in store, each living ttl from its creation.
func New(store Store, ttl time.Duration) *Tasks {
	return &Tasks{store: store, ttl: ttl, now: time.Now, cancels: map[string]context.CancelFunc{}}
}

// TTL is every task's time to live.
func (t *Tasks) TTL() time.Duration { return t.ttl }

// NewID returns a task id of 130 random bits.
func NewID() string { return rand.Text() }

// Create stores a new working task of owner for a call of tool; cancel
// ends that call. Once Create returns, Get finds the task (the
// extension's task creation consistency).
func (t *Tasks) Create(owner, tool string, cancel context.CancelFunc) (Task, error) {
	t.Sweep()
	now := t.now()
	task := Task{ID: NewID(), Owner: owner, Tool: tool, Status: Working, Created: now, Updated: now, TTL: t.ttl}
	if err := t.store.Put(task); err != nil {
		return Task{}, err
	}
	t.mu.Lock()
	t.cancels[task.ID] = cancel
	t.mu.Unlock()
	return task, nil
}

// Get returns owner's task id.
func (t *Tasks) Get(owner, id string) (Task, error) {
	task, ok := t.store.Get(id)
	if !ok || task.Owner != owner {
		return Task{}, ErrNotFound
	}
	if task.Expired(t.now()) {
		t.drop(task)
		return Task{}, ErrNotFound
	}
	return task, nil
}

// Cancel cancels owner's task id: a working task's call is cancelled and
// the task is cancelled at once; a finished task stays as it is.
func (t *Tasks) Cancel(owner, id string) error {
	if _, err := t.Get(owner, id); err != nil {
		return err
	}
	t.finish(id, func(task *Task) { task.Status = Cancelled; task.Message = "cancelled by the client" })
	return nil
}

// SetCancel sets the cancel of a task's call, once the call is under way;
// a task already finished has it called at once.
func (t *Tasks) SetCancel(id string, cancel context.CancelFunc) {
	t.mu.Lock()
	task, ok := t.store.Get(id)
	if ok && !task.Status.Terminal() {
		t.cancels[id] = cancel
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	cancel()
}

// NeedInput moves a working task to InputRequired: its call answered
// with input requests (and a state to give back) instead of a result.
func (t *Tasks) NeedInput(id string, inputRequests, requestState json.RawMessage) {
	t.update(id, func(task *Task) bool {
		if task.Status != Working {
			return false
		}
		task.Status, task.Message = InputRequired, "waiting for the client's answer"
		task.InputRequests, task.RequestState = inputRequests, requestState
		return true
	})
}

// Resume moves owner's task id from InputRequired back to Working, and
// returns it as it was (its input requests and request state) for the
// call to be made again with the answers. ok is false for a task that
// was not waiting for input.
func (t *Tasks) Resume(owner, id string) (Task, bool, error) {
	if _, err := t.Get(owner, id); err != nil {
		return Task{}, false, err
	}
	var was Task
	resumed := t.update(id, func(task *Task) bool {
		if task.Status != InputRequired {
			return false
		}
		was = *task
		task.Status, task.Message = Working, ""
		task.InputRequests, task.RequestState = nil, nil
		return true
	})
	return was, resumed, nil
}

// Progress sets a working task's status message.
func (t *Tasks) Progress(id, message string) {
	t.update(id, func(task *Task) bool {
		if task.Status.Terminal() {
			return false
		}
		task.Message = message
		return true
	})
}

// Complete ends a working task with its call's result. A task already
// finished (cancelled, expired) keeps its status.
func (t *Tasks) Complete(id string, result json.RawMessage) {
	t.finish(id, func(task *Task) { task.Status = Completed; task.Message = ""; task.Result = result })
}

// CompleteRun ends a working task with the result of run runID, which the
// run registry keeps: the task keeps only its name.
func (t *Tasks) CompleteRun(id, runID string, contentOnly bool) {
	t.finish(id, func(task *Task) {
		task.Status, task.Message = Completed, ""
		task.RunID, task.ContentOnly = runID, contentOnly
	})
}

// Fail ends a working task with its call's JSON-RPC error object.
func (t *Tasks) Fail(id string, rpcError json.RawMessage, message string) {
	t.finish(id, func(task *Task) { task.Status = Failed; task.Message = message; task.Error = rpcError })
}

// finish moves a working task to a terminal status once, and releases
// (cancels) its call: a finished call's cancel is a no-op.
func (t *Tasks) finish(id string, set func(*Task)) {
	moved := t.update(id, func(task *Task) bool {
		if task.Status.Terminal() {
			return false
		}
		set(task)
		return true
	})
	if moved {
		t.release(id)
	}
}

func (t *Tasks) update(id string, change func(*Task) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	task, ok := t.store.Get(id)
	if !ok || !change(&task) {
		return false
	}
	task.Updated = t.now()
	if err := t.store.Put(task); err != nil {
		// The result does not fit beside the running tasks: keep the
		// task, failed, saying why, rather than lose it.
		task.Status, task.Result = Failed, nil
		task.Message = "the result was larger than the server keeps for tasks"
		task.Error, _ = json.Marshal(map[string]any{"code": -32603, "message": task.Message})
		_ = t.store.Put(task)
	}
	return true
}

func (t *Tasks) release(id string) {
	t.mu.Lock()
	cancel := t.cancels[id]
	delete(t.cancels, id)
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (t *Tasks) drop(task Task) {
	t.release(task.ID)
	t.store.Delete(task.ID)
}

// Sweep drops every expired task, cancelling the call of one still
// working.
func (t *Tasks) Sweep() {
	now := t.now()
	for _, task := range t.store.List() {
		if task.Expired(now) {
			t.drop(task)
		}
	}
}

// Has reports whether task id exists, whoever owns it: for the layer
// that routes a call's answer to its task, never for a client.
func (t *Tasks) Has(id string) bool {
	_, ok := t.store.Get(id)
	return ok
}

// Peek returns task id whoever owns it: for the server's own log, never
// for a client.
func (t *Tasks) Peek(id string) (Task, bool) { return t.store.Get(id) }

// Running is how many tasks are working.
func (t *Tasks) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cancels)
}
