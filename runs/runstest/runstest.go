// Package runstest has what the run service's tests and its callers'
// share: a runner that echoes, a metrics counter and an audit log read
// back. It imports no runbox package above sandbox.
package runstest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Echo answers every job with its stdin as stdout, after a wall time of
// Wall, and keeps the jobs it ran.
type Echo struct {
	Wall time.Duration
	mu   sync.Mutex
	jobs []contract.Job
}

func (r *Echo) Run(_ context.Context, req sandbox.RunRequest) contract.Result {
	job := req.Job
	r.mu.Lock()
	r.jobs = append(r.jobs, job)
	r.mu.Unlock()
	code := 0
	return contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, ExitCode: &code,
		Stdout: job.Stdin, Artifacts: []contract.Artifact{}, Metrics: contract.Metrics{WallMs: r.Wall.Milliseconds()}}
}
func (r *Echo) Sessions() sandbox.SessionRunner                   { return nil }
func (r *Echo) Peek(context.Context, string) (sandbox.Peek, bool) { return sandbox.Peek{}, false }
func (r *Echo) Close() error                                      { return nil }
func (r *Echo) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}
func (r *Echo) MarkKept(string) {}

// Ran is the jobs run so far.
func (r *Echo) Ran() []contract.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]contract.Job(nil), r.jobs...)
}

// Observed counts the results the pipeline reports to its metrics.
type Observed struct {
	mu  sync.Mutex
	res []contract.Result
}

func (o *Observed) Observe(r contract.Result) {
	o.mu.Lock()
	o.res = append(o.res, r)
	o.mu.Unlock()
}

// Results is the results observed so far.
func (o *Observed) Results() []contract.Result {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]contract.Result(nil), o.res...)
}

// AuditLog turns m's audit log on, keeping the code, in a file of the
// test's; read returns its lines.
func AuditLog(t *testing.T, m *manifest.Manifest) (l *audit.Log, read func() []audit.Entry) {
	t.Helper()
	m.Audit.Enabled, m.Audit.Path, m.Audit.StoreCode = true, filepath.Join(t.TempDir(), "audit.jsonl"), true
	l, err := audit.Open(m.Audit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, func() []audit.Entry {
		t.Helper()
		es, err := audit.Read(m.Audit.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
}

// NoRunner runs nothing: a one-off run panics, it keeps no sessions and
// adopts nothing. Tests embed it for the methods they do not exercise.
type NoRunner struct{}

func (NoRunner) Run(context.Context, sandbox.RunRequest) contract.Result {
	panic("a session call ran as a one-off run")
}
func (NoRunner) Sessions() sandbox.SessionRunner                   { return nil }
func (NoRunner) Peek(context.Context, string) (sandbox.Peek, bool) { return sandbox.Peek{}, false }
func (NoRunner) Close() error                                      { return nil }

func (NoRunner) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (NoRunner) MarkKept(string) {}

// Gate runs each job until the test closes Release (answering "done") or
// its call's context ends (answering the cancelled result), and says which
// jobs were cancelled.
type Gate struct {
	Release chan struct{}
	// More, when set, adds to every released run's result.
	More    func(*contract.Result)
	mu      sync.Mutex
	stopped map[string]bool
	// soFar, when set, is every run's output so far (Peek).
	soFar *sandbox.Peek
}

// NewGate returns a Gate none of whose runs is released.
func NewGate() *Gate {
	return &Gate{Release: make(chan struct{}), stopped: map[string]bool{}}
}

func (r *Gate) Run(ctx context.Context, req sandbox.RunRequest) contract.Result {
	job := req.Job
	select {
	case <-r.Release:
		code := 0
		res := contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, ExitCode: &code,
			Stdout: "done\n", Artifacts: []contract.Artifact{}, Metrics: contract.Metrics{WallMs: 7}}
		if r.More != nil {
			r.More(&res)
		}
		return res
	case <-ctx.Done():
		r.mu.Lock()
		r.stopped[job.RunID] = true
		r.mu.Unlock()
		return contract.Fail(job, contract.Cancelled())
	}
}
func (r *Gate) Sessions() sandbox.SessionRunner { return nil }
func (r *Gate) Peek(context.Context, string) (sandbox.Peek, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.soFar == nil {
		return sandbox.Peek{}, false
	}
	return *r.soFar, true
}

// SetSoFar makes p every run's output so far.
func (r *Gate) SetSoFar(p sandbox.Peek) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.soFar = &p
}
func (r *Gate) Close() error { return nil }
func (r *Gate) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}
func (r *Gate) MarkKept(string) {}

// WasStopped says whether the run id's call was cancelled.
func (r *Gate) WasStopped(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped[id]
}

// Background counts long runs by how they ended, and how many are held.
type Background struct {
	mu    sync.Mutex
	ended map[string]int
	held  int
}

// NewBackground returns a counter of none.
func NewBackground() *Background { return &Background{ended: map[string]int{}} }

func (b *Background) BackgroundEnded(e string) { b.mu.Lock(); b.ended[e]++; b.mu.Unlock() }
func (b *Background) LongRunsHeld(n int)       { b.mu.Lock(); b.held = n; b.mu.Unlock() }

// Ended is how many long runs ended so.
func (b *Background) Ended(e string) int { b.mu.Lock(); defer b.mu.Unlock(); return b.ended[e] }

// Held is how many long runs were held when last told.
func (b *Background) Held() int { b.mu.Lock(); defer b.mu.Unlock(); return b.held }

func (b *Background) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("ended %v, held %d", b.ended, b.held)
}
