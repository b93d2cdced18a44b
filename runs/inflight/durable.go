package inflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Long runs outlive the server process: an agent told "running" may come
// back after a restart, even a kill -9. A run becomes durable when it goes
// to the background or when it is an MCP task's call: its record (the Held
// fields, the call's audit facts and the box's Detached record once the job
// is sent) is then written to the run store in the state directory, and
// again at its end with its result (runs.KeptResult: the contract.Result and
// the content of its artifacts and displays). A run that ends before the
// bound writes nothing. A restarted server finds a record by its run id: a
// finished run's result is read back, its resources kept again in this
// server's artifact store, and its answer rendered when it is collected; a
// running one is adopted (the runner finds its box by the record and waits
// for its end); a record whose box is gone answers that its result is lost.

// Record kinds in the run store.
const (
	recordRun     = runs.RecordRun
	recordTaskRun = runs.RecordTaskRun
)

// Adopter finds a run's box again in a restarted server and waits (a
// bounded time) for the run's end: the result the dead server would have
// built, or one saying the result is lost. Cancelling ctx cancels the run.
type Adopter interface {
	Adopt(ctx context.Context, d sandbox.Detached) contract.Result
	// MarkKept marks the box of a run whose record the store now holds
	// ([sandbox.Runner].MarkKept).
	MarkKept(boxID string)
}

// keeping is what a handle adds to be kept in the store.
type keeping struct {
	// durable: the run is kept in the store (a background run, or a
	// task's call, when the server has a store).
	durable  bool
	taskID   string
	detached *sandbox.Detached
	// marked: the box in detached was marked kept (Adopter.MarkKept).
	marked bool
	call   runs.RecordedCall
	// release gives up the store's hold of the record (the run's end).
	release func()
	// saveMu orders the record's writes: each writes the handle as it
	// is when the write begins.
	saveMu sync.Mutex
	// remote: another live server runs the run; this one reads its
	// record (pollRemote).
	remote bool
}

// Durable keeps h's long runs in store, so that they outlive the
// process; adopter finds a running record's box in a restarted server
// (nil: such a record answers lost). Call it before serving.
func (h *Registry) Durable(store *runstore.Store, adopter Adopter) {
	h.store, h.adopter = store, adopter
}

func (hd *handle) kindID() (string, string) {
	if hd.taskID != "" {
		return recordTaskRun, hd.taskID
	}
	return recordRun, hd.RunID
}

// persist makes hd durable: its record is held by this process and
// written.
func (h *Registry) persist(hd *handle) {
	if h.store == nil {
		return
	}
	kind, id := hd.kindID()
	release, _ := h.store.Hold(kind, id)
	h.mu.Lock()
	hd.durable = true
	// A run that ended meanwhile (finish saw it not yet durable) is
	// written here, finished, and not held.
	over := !hd.Ended.IsZero()
	if !over {
		hd.release = release
	}
	h.mu.Unlock()
	h.save(hd)
	if over {
		release()
	}
}

// sent takes the box's Detached record of hd's run (RunRequest.OnSent):
// written at once when the run is durable already.
func (h *Registry) sent(hd *handle, d sandbox.Detached) {
	h.mu.Lock()
	hd.detached = &d
	save := hd.durable
	h.mu.Unlock()
	if save {
		h.save(hd)
	}
}

// save writes hd's record as it is now.
func (h *Registry) save(hd *handle) {
	hd.saveMu.Lock()
	defer hd.saveMu.Unlock()
	h.mu.Lock()
	if !hd.durable || hd.remote {
		h.mu.Unlock()
		return
	}
	rec := runs.Record{Version: runs.RecordVersion, RunID: hd.RunID, TaskID: hd.taskID, Owner: hd.Owner, Tool: hd.Tool, Language: hd.Language,
		Started: hd.Started, Ended: hd.Ended, Cancelled: hd.Cancelled, Ending: string(hd.Ending), Audit: hd.Audit,
		Call: hd.call, Detached: hd.detached}
	res := hd.Result
	// The first record that holds a running box marks the box, so that
	// a server of another state directory leaves it.
	mark := hd.detached != nil && hd.Ended.IsZero() && !hd.marked && h.adopter != nil
	if mark {
		hd.marked = true
	}
	h.mu.Unlock()
	if mark {
		h.adopter.MarkKept(rec.Detached.BoxID)
	}
	err := h.put(hd, rec, res, true)
	if errors.Is(err, runstore.ErrFull) && res != nil {
		// The result with its files' content does not fit beside the
		// running records: keep the result, its resources lost.
		err = h.put(hd, rec, res, false)
	}
	if err != nil {
		h.logger.Warn("run store: this run's record is not kept (it will not outlive the server)", "run_id", hd.RunID, "err", err)
	}
}

// put writes rec, with res (when the run ended) and, withData, the
// content of its artifacts and displays.
func (h *Registry) put(hd *handle, rec runs.Record, res *contract.Result, withData bool) error {
	if res != nil {
		kept := runs.Keep(*res, withData)
		rec.Result = &kept
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	kind, id := hd.kindID()
	return h.store.Put(runstore.Entry{Kind: kind, ID: id, Finished: !rec.Ended.IsZero(), Data: data})
}

// ended writes a durable run's final record and gives up its hold.
func (h *Registry) ended(hd *handle) {
	h.mu.Lock()
	save, release := hd.durable, hd.release
	hd.release = nil
	h.mu.Unlock()
	if save {
		h.save(hd)
	}
	if release != nil {
		release()
	}
}

// load reads a run's record.
func (h *Registry) load(kind, id string) (runs.Record, bool) {
	var rec runs.Record
	e, ok := h.store.Get(kind, id)
	if !ok || json.Unmarshal(e.Data, &rec) != nil {
		return runs.Record{}, false
	}
	return rec, true
}

// restore finds owner's run id in the store (a run of a server that
// stopped, or of another server on the same state directory) and keeps
// it as a handle: finished, with its stored result; running in another
// live server, read from its record; or adopted.
func (h *Registry) restore(ctx context.Context, owner, id string) (*handle, bool) {
	if h.store == nil {
		return nil, false
	}
	rec, ok := h.load(recordRun, id)
	if !ok || rec.Owner != owner {
		return nil, false
	}
	hd := &handle{Held: Held{RunID: rec.RunID, Owner: rec.Owner, Tool: rec.Tool, Language: rec.Language,
		Started: rec.Started, Background: true, Cancelled: rec.Cancelled, Ending: Ending(rec.Ending), Audit: rec.Audit},
		done: make(chan struct{})}
	hd.durable, hd.call, hd.detached = true, rec.Call, rec.Detached
	var adopt bool
	if rec.Ended.IsZero() {
		release, held := h.store.Hold(recordRun, id)
		if held {
			hd.release, adopt = release, true
		} else {
			hd.remote = true
			hd.Audit = nil // its server writes the line
		}
	} else {
		res := h.storedResult(rec)
		hd.Ended, hd.Result = rec.Ended, &res
		hd.decided = true
		close(hd.done)
	}
	h.mu.Lock()
	if had, ok := h.runs[id]; ok {
		// Another waiter restored it first.
		h.mu.Unlock()
		if hd.release != nil {
			hd.release()
		}
		return had, had.Owner == owner && had.Background
	}
	if h.closed {
		h.mu.Unlock()
		if hd.release != nil {
			hd.release()
		}
		return nil, false
	}
	h.runs[id] = hd
	if rec.Ended.IsZero() {
		// A running run counts against the caps, over them or not: it
		// runs already.
		h.long[owner]++
		h.nLong++
		h.held()
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hd.cancel = cancel
	h.mu.Unlock()
	unhook := context.AfterFunc(h.base, cancel)
	switch {
	case adopt:
		go func() {
			defer unhook()
			defer cancel()
			h.adopt(runCtx, hd)
		}()
	case hd.remote:
		go func() {
			defer unhook()
			defer cancel()
			h.pollRemote(runCtx, hd)
		}()
	default:
		unhook()
		cancel()
	}
	h.logger.Info("background run restored", "run_id", id, "running", rec.Ended.IsZero(), "adopted", adopt)
	return hd, true
}

// storedResult is the result a finished record keeps, its resources kept
// again in this server's artifact store for the run's owner; a record of
// another version, or without a result, answers that the result is lost.
func (h *Registry) storedResult(rec runs.Record) contract.Result {
	var why string
	switch {
	case rec.Version != runs.RecordVersion:
		why = fmt.Sprintf("its record was written by another version of runbox (record version %d, this server reads %d)", rec.Version, runs.RecordVersion)
	case rec.Result == nil:
		why = "its record keeps no result"
	}
	if why != "" {
		res := contract.Fail(contract.Job{RunID: rec.RunID}, contract.RunLost(why))
		res.Language, res.Isolation = rec.Language, h.m.Isolation
		return res
	}
	res := rec.Result.Restore()
	h.keepResources(rec.Owner, res)
	return res
}

// adopt waits, through the runner, for the end of a run whose server
// stopped, and keeps its result as the run's own would have been: the
// audit line written once, when the client collects it.
func (h *Registry) adopt(ctx context.Context, hd *handle) {
	d := h.svc
	var res contract.Result
	switch {
	case hd.detached == nil:
		res = contract.Fail(contract.Job{RunID: hd.RunID}, contract.RunLost("its server stopped before the job reached its sandbox"))
	case h.adopter == nil:
		res = contract.Fail(contract.Job{RunID: hd.RunID}, contract.RunLost("this server cannot find sandboxes of another"))
	default:
		res = h.adopter.Adopt(ctx, *hd.detached)
	}
	res.RunID = hd.RunID
	if res.Language == "" {
		res.Language = hd.Language
	}
	if res.Isolation == "" {
		res.Isolation = h.m.Isolation
	}
	if d.Metrics != nil {
		d.Metrics.Observe(res)
	}
	if d.Audit != nil {
		e := runs.AuditEntry(d.Manifest, d.Transport, hd.call.Call(), res)
		if !h.hold(hd, &e) {
			h.record(&e)
		}
	}
	// The resources of the result are the run's owner's, whoever's call
	// adopted it.
	h.keepResources(hd.Owner, res)
	h.finish(hd, res)
}

// remotePoll is how often a run another server runs is read again.
const remotePoll = time.Second

// pollRemote follows a run another live server runs, through its
// record: its result once written; adopted, should that server die.
func (h *Registry) pollRemote(ctx context.Context, hd *handle) {
	t := time.NewTicker(remotePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.finish(hd, contract.Fail(contract.Job{RunID: hd.RunID}, contract.Cancelled()))
			return
		case <-t.C:
		}
		rec, ok := h.load(recordRun, hd.RunID)
		switch {
		case !ok:
			h.finish(hd, contract.Fail(contract.Job{RunID: hd.RunID}, contract.RunLost("its record is gone")))
			return
		case !rec.Ended.IsZero():
			h.finish(hd, h.storedResult(rec))
			return
		}
		if release, held := h.store.Hold(recordRun, hd.RunID); held {
			h.mu.Lock()
			hd.remote, hd.release, hd.detached, hd.Audit = false, release, rec.Detached, rec.Audit
			h.mu.Unlock()
			h.adopt(ctx, hd)
			return
		}
	}
}

// storeSweepEvery is how often the run store's expired records go.
const storeSweepEvery = time.Minute

// sweepStore drops expired records (every minute at most): a run nobody
// collected is abandoned, its held audit line written then.
func (h *Registry) sweepStore() {
	if h.store == nil {
		return
	}
	h.mu.Lock()
	due := h.now().Sub(h.storeSwept) >= storeSweepEvery
	if due {
		h.storeSwept = h.now()
	}
	h.mu.Unlock()
	if !due {
		return
	}
	h.store.Sweep(func(e runstore.Entry) {
		var rec runs.Record
		if e.Kind != recordRun || json.Unmarshal(e.Data, &rec) != nil || rec.Audit == nil || rec.Ending != "" {
			return
		}
		rec.Audit.Background = string(EndAbandoned)
		h.record(rec.Audit)
	})
}
