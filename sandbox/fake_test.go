package sandbox

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// fakeDriver starts fake boxes whose runbox-init is a goroutine speaking
// the real channel protocol, scripted by behave.
type fakeDriver struct {
	mu       sync.Mutex
	readyErr error
	startErr error
	// startBlock makes Start wait for its context (a hung platform).
	startBlock bool
	// pooledGate, when set, holds the starts of pooled boxes until it is
	// closed (or their context ends): refills that cannot keep up.
	pooledGate chan struct{}
	behave     func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job)
	verdict    Verdict

	started, removed, killed atomic.Int64
	boxes                    []*fakeBox
}

func (d *fakeDriver) Ready(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.readyErr
}

func (d *fakeDriver) setReady(err error) {
	d.mu.Lock()
	d.readyErr = err
	d.mu.Unlock()
}

func (d *fakeDriver) ImageDigest(context.Context, string) (string, error)  { return "sha256:fake", nil }
func (d *fakeDriver) Reap(context.Context, func(string) bool) (int, error) { return 0, nil }
func (d *fakeDriver) Isolation() string                                    { return manifest.IsolationRunc }
func (d *fakeDriver) Close() error                                         { return nil }

// fakeDriver's boxes cannot be found or reached again (fakeSessionDriver's
// and durableDriver's can).
func (d *fakeDriver) FindBoxes(context.Context, map[string]string) ([]FoundBox, error) {
	return nil, nil
}
func (d *fakeDriver) Attach(_ context.Context, id string) (Box, error) {
	return nil, &EngineError{Msg: "no such box " + id}
}
func (d *fakeDriver) MarkKept(context.Context, string) error { return nil }

func (d *fakeDriver) Start(ctx context.Context, spec BoxSpec) (Box, error) {
	d.mu.Lock()
	err, block, gate := d.startErr, d.startBlock, d.pooledGate
	d.mu.Unlock()
	if spec.Pooled && gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	host, box := net.Pipe()
	b := &fakeBox{d: d, host: host, box: box, spec: spec, started: time.Now(), alive: true}
	d.started.Add(1)
	d.mu.Lock()
	d.boxes = append(d.boxes, b)
	d.mu.Unlock()
	go b.serve()
	return b, nil
}

type fakeBox struct {
	d         *fakeDriver
	host, box net.Conn
	spec      BoxSpec
	started   time.Time
	mu        sync.Mutex
	alive     bool
	claims    int
}

// serve is the fake runbox-init: it reads the job and lets the script
// answer.
func (b *fakeBox) serve() {
	rr := initproto.NewResetReader(b.box)
	nonce, err := rr.Await()
	if err != nil {
		return
	}
	if _, err := b.box.Write(initproto.Ack(nonce)); err != nil {
		return
	}
	sess, err := yamux.Server(struct {
		io.Reader
		io.Writer
		io.Closer
	}{rr, b.box, b.box}, initproto.MuxConfig())
	if err != nil {
		return
	}
	defer sess.Close()
	st, err := sess.AcceptStream()
	if err != nil {
		return
	}
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, 1<<20)
	if err != nil || initproto.JobBlobs(h.Job, blobs) != nil {
		return
	}
	b.d.behave(sess, st, h.Job)
	<-sess.CloseChan()
}

func (b *fakeBox) ID() string         { return "fake" }
func (b *fakeBox) Started() time.Time { return b.started }
func (b *fakeBox) Exchange(context.Context) (Conn, error) {
	return fakeConn{b.host}, nil
}
func (b *fakeBox) Kill() {
	b.d.killed.Add(1)
	b.mu.Lock()
	b.alive = false
	b.mu.Unlock()
	b.box.Close()
}
func (b *fakeBox) Claim(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims++
	return nil
}
func (b *fakeBox) claimed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.claims
}
func (b *fakeBox) Verdict(context.Context, VerdictQuery) Verdict { return b.d.verdict }
func (b *fakeBox) Alive() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.alive
}
func (b *fakeBox) Remove() {
	b.d.removed.Add(1)
	b.host.Close()
	b.box.Close()
}

type fakeConn struct{ net.Conn }

func (fakeConn) Diag() string { return "" }

// reply is a box that answers with rep (stdout: the code) and sends
// contents as its artifacts, each on a stream of its own.
func reply(rep initproto.Report, contents ...[]byte) func(*yamux.Session, *yamux.Stream, *initproto.Job) {
	return func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
		rep := rep
		if rep.Stdout == nil {
			rep.Stdout = job.Code
		}
		_ = initproto.SendReport(st, &rep)
		_ = st.Close()
		for i, c := range contents {
			as, err := sess.OpenStream()
			if err != nil {
				return
			}
			_ = initproto.Send(as, initproto.Header{Kind: initproto.StreamArtifact, Index: i}, c)
			_ = as.Close()
		}
	}
}

// hang is a box that never answers.
func hang(*yamux.Session, *yamux.Stream, *initproto.Job) {}

func testManifest(t *testing.T, edit func(*manifest.Manifest)) *manifest.Manifest {
	t.Helper()
	m := manifest.Default()
	m.Concurrency, m.QueueSize = 2, 2
	m.Pool.Size = 0
	if edit != nil {
		edit(m)
	}
	return m
}

func newTestRunner(t *testing.T, d *fakeDriver, m *manifest.Manifest) *BoxRunner {
	t.Helper()
	return newTestRunnerOf(t, d, d, m)
}

// newTestRunnerOf is a runner over drv, whose boxes d counts; when the
// test ends, it checks that every box it started was removed.
func newTestRunnerOf(t *testing.T, drv Driver, d *fakeDriver, m *manifest.Manifest) *BoxRunner {
	t.Helper()
	r := New(drv, Options{Manifest: m})
	r.grace = 300 * time.Millisecond
	t.Cleanup(func() {
		_ = r.Close()
		if s, rm := d.started.Load(), d.removed.Load(); s != rm {
			t.Errorf("%d boxes started, %d removed", s, rm)
		}
		if a := r.alive.Load(); a != 0 {
			t.Errorf("%d boxes still counted alive", a)
		}
	})
	return r
}

func testJob(t *testing.T, m *manifest.Manifest, timeout time.Duration) contract.Job {
	t.Helper()
	lang, _ := m.Language("python")
	return contract.Job{RunID: "r_test", Language: lang, Code: "print(1)", Timeout: timeout}
}
