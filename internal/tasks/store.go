package tasks

import (
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"
)

// Status is a task's state, as the extension names it.
type Status string

// The extension's task statuses. Completed, Failed and Cancelled are
// terminal: a task in one of them never changes again.
const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Task is one task as stored.
type Task struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Tool is the called tool's name (for logs and a later `runbox runs`).
	Tool    string    `json:"tool"`
	Status  Status    `json:"status"`
	Message string    `json:"message,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// TTL counts from Created; past it the task is gone.
	TTL time.Duration `json:"ttl"`
	// RunID names the run whose result is the task's, once Completed:
	// the run registry keeps that result, and the task's is rendered from
	// it when the client collects the task (ContentOnly: without its
	// structured content, as the call answered).
	RunID       string `json:"run_id,omitempty"`
	ContentOnly bool   `json:"content_only,omitempty"`
	// Result is the call's result, verbatim, once Completed by a call
	// that ran no run (RunID empty).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the call's JSON-RPC error object, verbatim, once Failed.
	Error json.RawMessage `json:"error,omitempty"`
	// InputRequests are the call's outstanding input requests while
	// InputRequired; RequestState is the state the call asked to be
	// given back with the answers (multi round-trip requests).
	InputRequests json.RawMessage `json:"input_requests,omitempty"`
	RequestState  json.RawMessage `json:"request_state,omitempty"`
}

// Expired reports whether the task's time to live has passed at now.
func (t Task) Expired(now time.Time) bool { return !now.Before(t.Created.Add(t.TTL)) }

func (t Task) size() int64 {
	return int64(len(t.Result) + len(t.Error) + len(t.Message) + len(t.InputRequests) + len(t.RequestState) + 256)
}

// ErrFull is a store that cannot take a task without dropping one still
// running.
var ErrFull = errors.New("task store is full")

// Store keeps tasks by id. Memory keeps them in this process; a store
// that outlives it implements the same four methods.
type Store interface {
	// Put adds or replaces a task. A store over its bounds drops its
	// oldest finished tasks first, and returns ErrFull if that is not
	// enough.
	Put(Task) error
	Get(id string) (Task, bool)
	Delete(id string)
	// List returns every task, in no order.
	List() []Task
}

// Memory is a bounded in-memory Store.
type Memory struct {
	maxTasks int
	maxBytes int64

	mu    sync.Mutex
	tasks map[string]Task
	bytes int64
}

// NewMemory returns a store of at most maxTasks tasks whose results and
// errors take at most maxBytes together.
func NewMemory(maxTasks int, maxBytes int64) *Memory {
	return &Memory{maxTasks: maxTasks, maxBytes: maxBytes, tasks: map[string]Task{}}
}

// Put implements Store.
func (m *Memory) Put(t Task) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := m.tasks[t.ID]
	count, bytes := len(m.tasks), m.bytes+t.size()
	if had {
		bytes -= old.size()
	} else {
		count++
	}
	if count > m.maxTasks || bytes > m.maxBytes {
		// Oldest finished first; never the task being put.
		var done []Task
		for _, o := range m.tasks {
			if o.Status.Terminal() && o.ID != t.ID {
				done = append(done, o)
			}
		}
		sort.Slice(done, func(i, j int) bool { return done[i].Updated.Before(done[j].Updated) })
		drop := 0
		for drop < len(done) && (count > m.maxTasks || bytes > m.maxBytes) {
			count--
			bytes -= done[drop].size()
			drop++
		}
		if count > m.maxTasks || bytes > m.maxBytes {
			return ErrFull
		}
		for _, o := range done[:drop] {
			delete(m.tasks, o.ID)
		}
	}
	m.tasks[t.ID] = t
	m.bytes = bytes
	return nil
}

// Get implements Store.
func (m *Memory) Get(id string) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[id]
	return t, ok
}

// Delete implements Store.
func (m *Memory) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tasks[id]; ok {
		m.bytes -= t.size()
		delete(m.tasks, id)
	}
}

// List implements Store.
func (m *Memory) List() []Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Task, 0, len(m.tasks))
	for _, t := range m.tasks {
		out = append(out, t)
	}
	return out
}
