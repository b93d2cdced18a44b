package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

var errBusy = errors.New("busy")

// slots bound how many boxes run at once and how many calls may wait.
type slots struct {
	run     chan struct{}
	waiting atomic.Int64
	queue   int64
}

func newSlots(concurrency, queue int) *slots {
	return &slots{run: make(chan struct{}, concurrency), queue: int64(queue)}
}

// acquire takes a slot, waiting in a bounded queue; past the bound it
// fails at once with errBusy.
func (s *slots) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.run <- struct{}{}:
		return func() { <-s.run }, nil
	default:
	}
	if s.waiting.Add(1) > s.queue {
		s.waiting.Add(-1)
		return nil, errBusy
	}
	defer s.waiting.Add(-1)
	select {
	case s.run <- struct{}{}:
		return func() { <-s.run }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// inUse says whether a run holds a slot or a call waits for one.
func (s *slots) inUse() bool {
	return len(s.run) > 0 || s.waiting.Load() > 0
}

// take waits for a slot for job and says how long it waited (the run's
// queue_ms); when none comes, the result says why (busy past the queue,
// or cancelled while waiting).
func (s *slots) take(ctx context.Context, job contract.Job, m *manifest.Manifest) (release func(), queueMs int64, refused *contract.Result) {
	queued := time.Now()
	release, err := s.acquire(ctx)
	if err == nil {
		return release, time.Since(queued).Milliseconds(), nil
	}
	r := contract.Fail(job, contract.Cancelled())
	if errors.Is(err, errBusy) {
		r = contract.Fail(job, contract.Busy(m.Concurrency, m.QueueSize))
	}
	return nil, 0, &r
}
