package inflight

import (
	"context"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// lookup finds owner's run id: in this server, or in the run store.
func (h *Registry) lookup(ctx context.Context, owner, id string) (*handle, bool) {
	if hd, ok := h.find(owner, id); ok {
		return hd, true
	}
	return h.restore(ctx, owner, id)
}

// Wait waits up to wait for owner's background run id (run_wait): its
// result once it ended, else nil and the run as it is (still running).
// ok is false for a run id owner has none of: another owner's, an
// unknown one and one whose result was dropped alike.
func (h *Registry) Wait(ctx context.Context, owner, id string, wait time.Duration) (res *contract.Result, run Held, ok bool) {
	hd, ok := h.lookup(ctx, owner, id)
	if !ok {
		return nil, Held{}, false
	}
	if hd.endsWithin(ctx, wait) {
		return h.collect(hd, EndWaited), h.snapshot(hd), true
	}
	return nil, h.snapshot(hd), true
}

// endsWithin waits up to d, or until ctx ends, for the run to end, and
// says whether it did.
func (hd *handle) endsWithin(ctx context.Context, d time.Duration) bool {
	// An ended run answers its result even when d is 0 (a select of a
	// closed done and a fired timer picks either).
	select {
	case <-hd.done:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-hd.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// cancelWait is how long Cancel waits for the stopped run's end.
const cancelWait = 30 * time.Second

// Cancel stops owner's background run id (run_cancel) and answers its
// result (a run already over answers the result it had), or nil and the
// run as it is when it has not ended within cancelWait.
func (h *Registry) Cancel(ctx context.Context, owner, id string) (res *contract.Result, run Held, ok bool) {
	hd, ok := h.lookup(ctx, owner, id)
	if !ok {
		return nil, Held{}, false
	}
	h.mu.Lock()
	how := EndWaited
	if hd.Ended.IsZero() {
		hd.Cancelled, how = true, EndCancelled
	}
	h.mu.Unlock()
	hd.cancel()
	if hd.endsWithin(ctx, cancelWait) {
		return h.collect(hd, how), h.snapshot(hd), true
	}
	return nil, h.snapshot(hd), true
}

// snapshot is hd's Held fields as they are now, for the caller to read
// outside the registry's lock.
func (h *Registry) snapshot(hd *handle) Held {
	h.mu.Lock()
	defer h.mu.Unlock()
	held := hd.Held
	held.Audit = nil
	return held
}
