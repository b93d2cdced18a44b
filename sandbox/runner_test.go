package sandbox

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestRunner(t *testing.T) {
	t.Run("a run answers with its report and artifacts, and its box is removed", func(t *testing.T) {
		art := bytes.Repeat([]byte{0, 0xff}, 300000) // raw bytes, larger than a window
		d := &fakeDriver{behave: reply(initproto.Report{OOMKills: 0, Artifacts: []initproto.Artifact{
			{Path: "a.bin", Size: int64(len(art)), Sent: true}, {Path: "big", Size: 1 << 40}}}, art)}
		m := testManifest(t, nil)
		r := newTestRunner(t, d, m)
		res := r.Run(context.Background(), testJob(t, m, time.Second))
		if res.Status != contract.StatusOK || res.Stdout != "print(1)" || res.Image != "sha256:fake" || res.Isolation != "runc" {
			t.Fatalf("result %+v", res)
		}
		if len(res.Artifacts) != 2 || !bytes.Equal(res.Artifacts[0].Data, art) || !res.Artifacts[1].ContentOmitted {
			t.Fatalf("artifacts %+v", res.Artifacts)
		}
	})

	t.Run("the platform away: a sandbox result with its hint, then recovery", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{})}
		d.setReady(&EngineError{Msg: "the Docker engine is not reachable", Hint: "Start the engine."})
		m := testManifest(t, nil)
		r := newTestRunner(t, d, m)
		res := r.Run(context.Background(), testJob(t, m, time.Second))
		if res.Error == nil || res.Error.Kind != contract.KindSandbox || res.Error.Hint != "Start the engine." {
			t.Fatalf("result %+v", res.Error)
		}
		d.setReady(nil)
		d.startErr = errors.New("create: connection refused")
		if res := r.Run(context.Background(), testJob(t, m, time.Second)); res.Error == nil || !strings.Contains(res.Error.Message, "connection refused") {
			t.Fatalf("a failed start: %+v", res.Error)
		}
		d.startErr = nil
		if res := r.Run(context.Background(), testJob(t, m, time.Second)); res.Status != contract.StatusOK {
			t.Fatalf("after recovery: %+v", res.Error)
		}
	})

	t.Run("the backstop kills a box that never answers", func(t *testing.T) {
		d := &fakeDriver{behave: hang}
		m := testManifest(t, nil)
		r := newTestRunner(t, d, m)
		start := time.Now()
		res := r.Run(context.Background(), testJob(t, m, 200*time.Millisecond))
		if res.Error == nil || res.Error.Kind != contract.KindTimeout || d.killed.Load() == 0 {
			t.Fatalf("result %+v, killed %d", res.Error, d.killed.Load())
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("took %s", took)
		}
	})

	t.Run("a cancelled call kills its box at once", func(t *testing.T) {
		d := &fakeDriver{behave: hang}
		m := testManifest(t, nil)
		r := newTestRunner(t, d, m)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		res := r.Run(ctx, testJob(t, m, 30*time.Second))
		if res.Error == nil || !strings.Contains(res.Error.Message, "cancelled") || d.killed.Load() == 0 || time.Since(start) > 2*time.Second {
			t.Fatalf("result %+v, killed %d, took %s", res.Error, d.killed.Load(), time.Since(start))
		}
	})

	t.Run("the OOM verdict of the platform", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{OOMKills: -1, ExitCode: 137, Signal: 9}), verdict: Verdict{OOMKilled: true}}
		m := testManifest(t, nil)
		r := newTestRunner(t, d, m)
		if res := r.Run(context.Background(), testJob(t, m, time.Second)); res.Error == nil || res.Error.Kind != contract.KindOOM {
			t.Fatalf("result %+v", res.Error)
		}
	})

	t.Run("a box the platform took away", func(t *testing.T) {
		d := &fakeDriver{behave: func(*yamux.Session, *yamux.Stream, *initproto.Job) {}, verdict: Verdict{Gone: "the sandbox pod was evicted"}}
		d.behave = func(sess *yamux.Session, _ *yamux.Stream, _ *initproto.Job) { _ = sess.Close() }
		m := testManifest(t, nil)
		r := newTestRunner(t, d, m)
		res := r.Run(context.Background(), testJob(t, m, time.Second))
		if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, "evicted") || !strings.Contains(res.Error.Hint, "not because of your code") {
			t.Fatalf("result %+v", res.Error)
		}
	})
}

func TestSlots(t *testing.T) {
	t.Run("past the queue a call is refused at once", func(t *testing.T) {
		d := &fakeDriver{behave: hang}
		m := testManifest(t, func(m *manifest.Manifest) { m.Concurrency, m.QueueSize = 1, 0 })
		r := newTestRunner(t, d, m)
		defer occupy(t, r, m)()
		start := time.Now()
		// A call that waited would wait for the occupant, which never
		// ends, and then for its own minute: ten seconds tells them apart
		// on any machine.
		res := r.Run(context.Background(), testJob(t, m, time.Minute))
		if res.Error == nil || res.Error.Limit != contract.LimitBusy || time.Since(start) > 10*time.Second {
			t.Fatalf("result %+v after %s", res.Error, time.Since(start))
		}
	})
	t.Run("a call waiting in the queue can be cancelled, and says how long it waited", func(t *testing.T) {
		d := &fakeDriver{behave: hang}
		m := testManifest(t, func(m *manifest.Manifest) { m.Concurrency, m.QueueSize = 1, 1 })
		r := newTestRunner(t, d, m)
		defer occupy(t, r, m)()
		wctx, wcancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, wcancel)
		res := r.Run(wctx, testJob(t, m, time.Second))
		if res.Error == nil || !strings.Contains(res.Error.Message, "cancelled") {
			t.Fatalf("result %+v", res.Error)
		}
		if d.started.Load() != 1 {
			t.Fatalf("a cancelled waiting call started a box")
		}
	})
	t.Run("queued calls run when a slot frees, with queue_ms", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{})}
		m := testManifest(t, func(m *manifest.Manifest) { m.Concurrency, m.QueueSize = 1, 8 })
		r := newTestRunner(t, d, m)
		var wg sync.WaitGroup
		results := make([]contract.Result, 6)
		for i := range results {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = r.Run(context.Background(), testJob(t, m, time.Second)) }()
		}
		wg.Wait()
		for _, res := range results {
			if res.Status != contract.StatusOK {
				t.Fatalf("result %+v", res.Error)
			}
		}
	})
}

func TestPool(t *testing.T) {
	pooled := func(m *manifest.Manifest) {
		m.Pool.Size = 1
		m.Pool.IdleSeconds = 60
		m.Languages = m.Languages[:1] // python
	}
	t.Run("a call takes a pooled box, and the pool refills once quiet", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{})}
		m := testManifest(t, pooled)
		r := newTestRunner(t, d, m)
		if err := r.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
		res := r.Run(context.Background(), testJob(t, m, time.Second))
		if res.Status != contract.StatusOK || !res.Metrics.Pooled {
			t.Fatalf("result %+v pooled %v", res.Error, res.Metrics.Pooled)
		}
		if len(d.boxes[0].spec.InitArgs) == 0 {
			t.Error("a pooled python box has no prestarted interpreter")
		}
		waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
	})
	t.Run("back-to-back calls start no refill", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{})}
		m := testManifest(t, pooled)
		r := newTestRunner(t, d, m)
		_ = r.Ready(context.Background())
		waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
		before := d.started.Load()
		for range 20 {
			r.Run(context.Background(), testJob(t, m, time.Second))
		}
		// 20 runs: the first took the pooled box, 19 started cold; the
		// pool started nothing while they ran one after another.
		if got := d.started.Load() - before; got != 19 {
			t.Fatalf("%d boxes started for 20 back-to-back runs, want 19", got)
		}
	})
	t.Run("a dead pooled box is not handed out", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{})}
		m := testManifest(t, pooled)
		r := newTestRunner(t, d, m)
		_ = r.Ready(context.Background())
		waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
		d.boxes[0].Kill()
		if res := r.Run(context.Background(), testJob(t, m, time.Second)); res.Metrics.Pooled || res.Status != contract.StatusOK {
			t.Fatalf("pooled %v, %+v", res.Metrics.Pooled, res.Error)
		}
	})
	t.Run("a pooled box starts at low weight and is claimed by its job; a cold box never", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{})}
		m := testManifest(t, pooled)
		r := newTestRunner(t, d, m)
		_ = r.Ready(context.Background())
		waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
		if res := r.Run(context.Background(), testJob(t, m, time.Second)); !res.Metrics.Pooled {
			t.Fatal("the first run did not take the pooled box")
		}
		if res := r.Run(context.Background(), testJob(t, m, time.Second)); res.Metrics.Pooled {
			t.Fatal("a back-to-back run took a pooled box")
		}
		d.mu.Lock()
		first, second := d.boxes[0], d.boxes[1]
		d.mu.Unlock()
		if !first.spec.Pooled || second.spec.Pooled {
			t.Fatalf("spec.Pooled: pooled box %v, cold box %v", first.spec.Pooled, second.spec.Pooled)
		}
		waitFor(t, func() bool { return first.claimed() == 1 })
		if second.claimed() != 0 {
			t.Fatal("a cold box was claimed")
		}
	})
	t.Run("a call that finds no ready box starts its own, not waiting for refills", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{}), pooledGate: make(chan struct{})}
		m := testManifest(t, pooled)
		r := newTestRunner(t, d, m)
		_ = r.Ready(context.Background())
		// The refill is under way and cannot finish.
		waitFor(t, func() bool { return r.pool.startsUnderWay() == 1 })
		done := make(chan contract.Result, 1)
		go func() { done <- r.Run(context.Background(), testJob(t, m, time.Second)) }()
		select {
		case res := <-done:
			if res.Status != contract.StatusOK || res.Metrics.Pooled {
				t.Fatalf("pooled %v, %+v", res.Metrics.Pooled, res.Error)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the call waited behind a refill")
		}
		close(d.pooledGate)
		waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
	})
	t.Run("close gives up a start under way", func(t *testing.T) {
		d := &fakeDriver{behave: reply(initproto.Report{}), startBlock: true}
		m := testManifest(t, pooled)
		r := New(d, Options{Manifest: m})
		_ = r.Ready(context.Background())
		time.Sleep(2 * quietPeriod)
		done := make(chan struct{})
		go func() { _ = r.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("Close waited for a hung start")
		}
	})
}

// occupy holds the runner's one slot with a run that never ends, until
// the returned func cancels it and waits for it.
func occupy(t *testing.T, r *BoxRunner, m *manifest.Manifest) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, testJob(t, m, 30*time.Second)); close(done) }()
	waitFor(t, func() bool { return r.Stats().Running == 1 })
	return func() { cancel(); <-done }
}

// startsUnderWay reports how many boxes the pool is starting.
func (p *pool) startsUnderWay() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starting
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 3 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
