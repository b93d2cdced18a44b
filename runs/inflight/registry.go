package inflight

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

// Ending says how a long run ended for its client: the audit line's
// background field and the metrics' label.
type Ending string

// How a background run ends.
const (
	// EndWaited: run_wait (or run_cancel of a run already over) handed
	// its result to the client.
	EndWaited Ending = "waited"
	// EndCancelled: run_cancel stopped it.
	EndCancelled Ending = "cancelled"
	// EndAbandoned: nobody collected it before it was dropped (its
	// result expired, the server held too many, or the server stopped).
	EndAbandoned Ending = "abandoned"
)

// BackgroundMetrics counts long runs; nil counts none.
type BackgroundMetrics interface {
	// BackgroundEnded counts a background run by how it ended.
	BackgroundEnded(ending string)
	// LongRunsHeld is how many long runs the server holds now.
	LongRunsHeld(n int)
}

// Held is a run in flight as the registry keeps it (a run answered with a
// handle, or a task's run): every field is plain data, so that a store
// outliving the process can keep it.
type Held struct {
	RunID    string
	Owner    string
	Tool     string
	Language string
	Started  time.Time
	// Ended is zero while the run goes on.
	Ended time.Time
	// Background: the call answered running; the run is a long run.
	Background bool
	// Cancelled: run_cancel asked to stop it.
	Cancelled bool
	// Ending is set once, when the client got its result or gave it up.
	Ending Ending
	// Result is the run's result once it ended (nil before): its answer
	// is rendered from it when the client collects it.
	Result *contract.Result
	// Audit is the run's audit line, held until Ending is known.
	Audit *audit.Entry
}

// handle is a Held run and what of it lives only in this process.
type handle struct {
	Held
	cancel context.CancelFunc
	done   chan struct{}
	// decided: the run reached its audit line, so its end is imminent
	// and the call waits for it rather than answering running.
	decided bool
	// refused says why the run was stopped at the bound instead of going
	// to the background.
	refused *contract.ErrorInfo
	keeping
}

// Registry holds the runs in flight: those that outlast
// limits.answer_within_seconds, by run id, and the runs of MCP tasks'
// calls, by task id, each bound to its owner (the caller's principal: a
// bearer token's name over HTTP, the connection over stdio); it counts the
// long runs (those and tasks' calls) against the manifest's caps.
type Registry struct {
	// svc runs the pipeline's end of a restored or adopted run (its
	// metrics, its audit line).
	svc runs.Service
	// artifacts keeps the resources of the results the registry answers
	// (nil keeps none).
	artifacts *runs.ArtifactStore

	within    time.Duration
	keep      time.Duration
	maxKept   int
	perClient int
	total     int
	audit     *audit.Log
	metrics   BackgroundMetrics
	logger    *slog.Logger
	now       func() time.Time
	m         *manifest.Manifest

	// store keeps the durable runs (durable.go); nil: none outlives the
	// process.
	store      *runstore.Store
	adopter    Adopter
	storeSwept time.Time

	base context.Context
	stop context.CancelFunc

	// taskKeep is how long a task's run stays in tasks (TaskTTL).
	taskKeep time.Duration

	mu   sync.Mutex
	runs map[string]*handle
	// tasks are the runs of MCP tasks' calls, by task id: while they
	// run, and once ended, with their result, when no store keeps it.
	tasks  map[string]*handle
	long   map[string]int
	nLong  int
	closed bool
}

// New returns the registry of the runs svc runs (svc.Manifest's limits,
// its audit log and logger), keeping the resources of the results it
// answers in artifacts. Finished results are kept as long as their
// artifacts (artifacts.ttl_seconds, at least a minute), at most maxKept of
// them; a task's, as long as its task lives.
func New(svc runs.Service, artifacts *runs.ArtifactStore, metrics BackgroundMetrics) *Registry {
	m, log, logger := svc.Manifest, svc.Audit, svc.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	base, stop := context.WithCancel(context.Background())
	return &Registry{
		svc: svc, artifacts: artifacts,
		within: m.Limits.AnswerWithin(), keep: max(m.Artifacts.TTL(), time.Minute),
		maxKept:   max(64, 4*m.Limits.MaxBackgroundRuns),
		perClient: m.Limits.MaxBackgroundRunsPerClient, total: m.Limits.MaxBackgroundRuns,
		audit: log, metrics: metrics, logger: logger, now: time.Now, m: m, taskKeep: TaskTTL(m),
		base: base, stop: stop, runs: map[string]*handle{}, tasks: map[string]*handle{}, long: map[string]int{},
	}
}

// take counts a long run of owner, or says which cap refuses it.
func (h *Registry) take(owner string) *contract.ErrorInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.takeLocked(owner)
}

func (h *Registry) takeLocked(owner string) *contract.ErrorInfo {
	if h.long[owner] >= h.perClient {
		bad := contract.BackgroundFull(h.perClient, true)
		return &bad
	}
	if h.nLong >= h.total {
		bad := contract.BackgroundFull(h.total, false)
		return &bad
	}
	h.long[owner]++
	h.nLong++
	h.held()
	return nil
}

// release gives back a long run of owner.
func (h *Registry) release(owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked(owner)
}

func (h *Registry) releaseLocked(owner string) {
	if h.long[owner] <= 1 {
		delete(h.long, owner)
	} else {
		h.long[owner]--
	}
	h.nLong--
	h.held()
}

func (h *Registry) held() {
	if h.metrics != nil {
		h.metrics.LongRunsHeld(h.nLong)
	}
}

// LongRuns is how many long runs the server holds, and how many of them
// owner does.
func (h *Registry) LongRuns(owner string) (total, ofOwner int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nLong, h.long[owner]
}

// begin registers a run of owner's call of tool, not yet a long run.
func (h *Registry) begin(owner, tool, language string, cancel context.CancelFunc) *handle {
	h.sweep()
	hd := &handle{Held: Held{RunID: runs.NewRunID(), Owner: owner, Tool: tool, Language: language, Started: h.now()},
		cancel: cancel, done: make(chan struct{})}
	h.mu.Lock()
	h.runs[hd.RunID] = hd
	h.mu.Unlock()
	return hd
}

// toBackground makes hd a long run at the bound: false when its run is
// already ending (wait for done), or when a cap refuses it (hd.refused
// set: its run is stopped).
func (h *Registry) toBackground(hd *handle) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hd.decided {
		return false
	}
	if h.closed {
		bad := contract.SandboxFailed("the server is stopping")
		hd.refused = &bad
		return false
	}
	if bad := h.takeLocked(hd.Owner); bad != nil {
		hd.refused = bad
		return false
	}
	hd.Background = true
	return true
}

// finish takes the run's result: the end of a foreground call (whose
// handle is dropped), or the result a background run keeps for its
// owner.
func (h *Registry) finish(hd *handle, res contract.Result) {
	h.mu.Lock()
	hd.decided = true
	hd.Result, hd.Ended = &res, h.now()
	switch {
	case hd.Background:
		h.releaseLocked(hd.Owner)
	case hd.taskID == "":
		delete(h.runs, hd.RunID)
	}
	h.mu.Unlock()
	h.ended(hd)
	if hd.taskID != "" && hd.durable {
		// The store keeps the task's result from now on.
		h.mu.Lock()
		if h.tasks[hd.taskID] == hd {
			delete(h.tasks, hd.taskID)
		}
		h.mu.Unlock()
	}
	close(hd.done)
}

// end marks hd's run as over: its call no longer answers running. It
// returns the refusal of a run stopped at the cap.
func (h *Registry) end(hd *handle) *contract.ErrorInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd.decided = true
	return hd.refused
}

// hold is the run's audit hook: a background run's line waits for its
// ending unless that is known already; every other line is written now.
// It reports whether the line is held.
func (h *Registry) hold(hd *handle, e *audit.Entry) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd.decided = true
	switch {
	case hd.refused != nil, !hd.Background:
		return false
	case hd.Cancelled:
		h.settleLocked(hd, EndCancelled)
		e.Background = string(EndCancelled)
		return false
	case h.closed:
		h.settleLocked(hd, EndAbandoned)
		e.Background = string(EndAbandoned)
		return false
	}
	hd.Audit = e
	return true
}

// settleLocked sets a background run's ending once, and returns its held
// audit line to write (nil: none held).
func (h *Registry) settleLocked(hd *handle, how Ending) *audit.Entry {
	if hd.Ending != "" || !hd.Background {
		return nil
	}
	hd.Ending = how
	if h.metrics != nil {
		h.metrics.BackgroundEnded(string(how))
	}
	e := hd.Audit
	hd.Audit = nil
	if e != nil {
		e.Background = string(how)
	}
	h.logger.Info("background run", "run_id", hd.RunID, "tool", hd.Tool, "ended", how, "ms", h.now().Sub(hd.Started).Milliseconds())
	return e
}

func (h *Registry) record(e *audit.Entry) {
	if e == nil || h.audit == nil {
		return
	}
	if err := h.audit.Record(*e); err != nil {
		h.logger.Warn("audit log", "run_id", e.RunID, "err", err)
	}
}

// find returns owner's background run id; another owner's reads as
// unknown.
func (h *Registry) find(owner, id string) (*handle, bool) {
	h.sweep()
	h.sweepStore()
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.runs[id]
	if !ok || hd.Owner != owner || !hd.Background {
		return nil, false
	}
	return hd, true
}

// collect hands a finished run's result to its owner: the run is waited.
func (h *Registry) collect(hd *handle, how Ending) *contract.Result {
	h.mu.Lock()
	e := h.settleLocked(hd, how)
	out := hd.Result
	h.mu.Unlock()
	h.record(e)
	if e != nil || how == EndCancelled {
		h.save(hd)
	}
	return out
}

// sweep drops finished runs past their keeping time, and the oldest
// finished past maxKept: one nobody collected is abandoned.
func (h *Registry) sweep() {
	now := h.now()
	var lines []*audit.Entry
	h.mu.Lock()
	var ended []*handle
	for _, hd := range h.runs {
		if hd.Background && !hd.Ended.IsZero() {
			ended = append(ended, hd)
		}
	}
	sortByEnd(ended)
	h.sweepTasksLocked(now)
	var gone []*handle
	for i, hd := range ended {
		if now.Sub(hd.Ended) >= h.keep || len(ended)-i > h.maxKept {
			if !hd.remote {
				lines = append(lines, h.settleLocked(hd, EndAbandoned))
			}
			delete(h.runs, hd.RunID)
			if hd.durable && !hd.remote {
				gone = append(gone, hd)
			}
		}
	}
	h.mu.Unlock()
	for _, e := range lines {
		h.record(e)
	}
	for _, hd := range gone {
		h.store.Delete(hd.kindID())
	}
}

// sortByEnd sorts ended runs oldest end first.
func sortByEnd(ended []*handle) {
	sort.Slice(ended, func(i, j int) bool { return ended[i].Ended.Before(ended[j].Ended) })
}

// Close stops every run still going and waits for them (at most
// closeWait); runs nobody collected are abandoned, and their audit lines
// written.
func (h *Registry) Close() {
	var lines []*audit.Entry
	h.mu.Lock()
	h.closed = true
	for _, hd := range h.runs {
		// A durable run's line stays in its record, for the server
		// that collects it after this one (or drops it as abandoned).
		if hd.Background && !hd.Ended.IsZero() && !hd.durable {
			lines = append(lines, h.settleLocked(hd, EndAbandoned))
		}
	}
	// A run is going until its done closes: its end is set before its
	// record is written.
	var going []*handle
	for _, hd := range h.runs {
		select {
		case <-hd.done:
		default:
			going = append(going, hd)
		}
	}

	h.mu.Unlock()
	h.stop()
	for _, e := range lines {
		h.record(e)
	}
	// The stopped runs hand their boxes to the runner's removal before
	// the runner itself closes (and waits for its removals).
	deadline := time.NewTimer(closeWait)
	defer deadline.Stop()
	for _, hd := range going {
		select {
		case <-hd.done:
		case <-deadline.C:
			return
		}
	}
}

// closeWait bounds how long Close waits for the runs it stopped.
const closeWait = 15 * time.Second
