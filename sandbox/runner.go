package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// Options configure a BoxRunner.
type Options struct {
	Manifest *manifest.Manifest
	// Logger reports what cannot be answered; default: discard.
	Logger *slog.Logger
	// Owner labels the boxes; default: this process ([CurrentOwner]).
	Owner *Owner
	// Network makes each run's side of the manifest's declared network,
	// when it declares endpoints: called once per run and per session
	// call, with the run's deadline and its [RunRequest].Approve. The
	// caller wires egress's proxy (cmd/runbox), credentials and all;
	// nil: the box's proxied connections are closed unanswered.
	Network func(deadline time.Time, approve Approver) Network
	// CA is runbox's CA certificate (PEM), which boxes trust when the
	// manifest's network entries have credentials (the network ends
	// their TLS with it); nil: none.
	CA []byte
	// Keep says whether the caller's store holds a record of a run in box
	// boxID ([RunRequest].OnSent): the reaper never removes such a box,
	// though the server that started it is dead, so that [Runner].Adopt
	// finds it. It is asked from the runner's first reap on, which New
	// starts: the store must be loaded before. nil: none is kept.
	Keep func(boxID string) bool
	// Checkpoints is the directory that keeps the sessions' checkpoints
	// (checkpoint.go); "": checkpoints are off.
	Checkpoints string
	// Workspaces is the directory of the named workspaces (workspace.go);
	// "": none are kept.
	Workspaces string
}

// BoxRunner is the run algorithm, once for every platform: admission
// (slots and a bounded queue), the warm pool, deadlines and the backstop,
// cancellation, the exchange over the box's channel, classification and
// the result. The Driver starts, asks about and removes the boxes.
type BoxRunner struct {
	d     Driver
	m     *manifest.Manifest
	log   *slog.Logger
	owner Owner
	slots *slots
	pool  *pool
	// grace is backstopGrace; tests shorten it.
	grace time.Duration

	// alive counts this server's boxes not yet removed.
	alive atomic.Int64
	// lastActive is when a run last began or ended (unix nanoseconds):
	// the pool refills only once the runner has been quiet.
	lastActive atomic.Int64
	// bg tracks removals of finished boxes.
	bg sync.WaitGroup

	stop context.CancelFunc
	done chan struct{}

	network func(time.Time, Approver) Network
	ca      []byte
	keep    func(string) bool

	// peeks are the runs on their boxes' channels now (peek.go).
	peeks liveRuns

	// ckpt keeps the sessions' checkpoints (checkpoint.go); nil: off.
	ckpt *checkpoints
	// sess are the open sessions (sessions.go), made on first use.
	sess     *sessions
	sessOnce sync.Once

	// ws are the named workspaces (workspace.go), in wsDir.
	ws     *workspaces
	wsOnce sync.Once
	wsDir  string
}

var _ Runner = (*BoxRunner)(nil)

// New returns the runner over a driver and starts its background work
// (reaping, pool upkeep) until Close.
func New(d Driver, o Options) *BoxRunner {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	owner := CurrentOwner()
	if o.Owner != nil {
		owner = *o.Owner
	}
	if k, ok := d.(Keeper); ok && o.Keep != nil {
		k.SetKeep(o.Keep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &BoxRunner{d: d, m: o.Manifest, log: log, owner: owner,
		slots: newSlots(o.Manifest.Concurrency, o.Manifest.QueueSize), grace: backstopGrace,
		stop: cancel, done: make(chan struct{}), network: o.Network, ca: o.CA, keep: o.Keep, wsDir: o.Workspaces}
	r.pool = newPool(ctx, r)
	if o.Checkpoints != "" && o.Manifest.Checkpoints.Enabled {
		r.ckpt = &checkpoints{dir: o.Checkpoints, c: o.Manifest.Checkpoints}
	}
	go r.background(ctx)
	return r
}

// Owner is the owner the runner labels its boxes with.
func (r *BoxRunner) Owner() Owner { return r.owner }

// Driver is the driver the runner starts boxes with.
func (r *BoxRunner) Driver() Driver { return r.d }

// Ready checks the platform; once it is, the pool fills.
func (r *BoxRunner) Ready(ctx context.Context) error {
	if err := r.d.Ready(ctx); err != nil {
		return err
	}
	r.pool.kick()
	return nil
}

// ImageDigest names the content of an image.
func (r *BoxRunner) ImageDigest(ctx context.Context, image string) (string, error) {
	return r.d.ImageDigest(ctx, image)
}

// Stats is what the runner is doing now, for metrics.
type Stats struct {
	Running  int            // boxes running a job
	Waiting  int            // calls waiting for a slot
	Alive    int            // boxes of this server on the platform (running, pooled, being removed)
	PoolIdle map[string]int // pooled boxes waiting, per language
}

// Stats reports the runner's state.
func (r *BoxRunner) Stats() Stats {
	return Stats{Running: len(r.slots.run), Waiting: int(r.slots.waiting.Load()),
		Alive: int(r.alive.Load()), PoolIdle: r.pool.idle()}
}

// Close removes the pooled boxes, stops the background work and closes
// the driver. Runs in flight end with their own contexts.
func (r *BoxRunner) Close() error {
	r.stop()
	<-r.done
	r.sessionsOf().closeAll()
	r.pool.drain()
	r.bg.Wait()
	return r.d.Close()
}

// start starts a box and counts it.
func (r *BoxRunner) start(ctx context.Context, spec BoxSpec) (Box, error) {
	b, err := r.d.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	r.alive.Add(1)
	return b, nil
}

// remove removes a box in the background; Close waits for it.
func (r *BoxRunner) remove(b Box) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		b.Remove()
		r.alive.Add(-1)
	}()
}

// claim raises a pooled box's CPU weight to a cold box's, beside the
// job's exchange: the call waits for no round trip, and until it lands
// the box only yields to other boxes.
func (r *BoxRunner) claim(b Box) {
	c, ok := b.(Claimer)
	if !ok {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		if err := c.Claim(context.Background()); err != nil {
			r.log.Debug("could not raise a pooled box's CPU weight", "box", b.ID(), "err", err)
		}
	}()
}

// active marks a run beginning or ending.
func (r *BoxRunner) active() { r.lastActive.Store(time.Now().UnixNano()) }

// quiet says whether no run is in progress or waiting, and none began or
// ended for at least d.
func (r *BoxRunner) quiet(d time.Duration) bool {
	return !r.slots.inUse() && time.Since(time.Unix(0, r.lastActive.Load())) >= d
}

// background reaps leftovers and keeps the pool fresh, until Close.
func (r *BoxRunner) background(ctx context.Context) {
	defer close(r.done)
	for {
		if n, err := r.d.Reap(ctx, r.keep); err != nil && ctx.Err() == nil {
			r.log.Debug("reaper: platform not reachable", "err", err)
		} else if n > 0 {
			r.log.Info("reaped leftover boxes", "count", n)
		}
		r.pool.expire()
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(reapInterval, r.m.Pool.Idle()/4)):
		}
	}
}

// fail is a result for a run that never reached a box.
func engineFail(job contract.Job, err error) contract.Result {
	ee := AsEngineError(err)
	return contract.Fail(job, contract.ErrorInfo{Kind: contract.KindSandbox, Message: ee.Msg, Hint: ee.Hint})
}
