package sandbox

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// durableDriver starts one-off boxes that outlive their server as
// runbox-init's do: a box keeps its job's report by run id when its channel
// breaks and answers a later channel's collect stream. Its code is
// "sleep:<ms>" (then stdout "done") or "hang". freeze plays the server's
// death: the handles given out so far stop acting (their kills and removals
// do nothing, their reads block), and a new server attaches again.
type durableDriver struct {
	mu     sync.Mutex
	boxes  map[string]*durableBox
	n      int
	frozen atomic.Bool
}

func (d *durableDriver) Ready(context.Context) error { return nil }
func (d *durableDriver) ImageDigest(context.Context, string) (string, error) {
	return "sha256:fake", nil
}
func (d *durableDriver) Reap(context.Context, func(string) bool) (int, error) { return 0, nil }
func (d *durableDriver) Isolation() string                                    { return manifest.IsolationRunc }
func (d *durableDriver) Close() error                                         { return nil }
func (d *durableDriver) MarkKept(context.Context, string) error               { return nil }

func (d *durableDriver) Start(_ context.Context, spec BoxSpec) (Box, error) {
	r, w := io.Pipe()
	d.mu.Lock()
	d.n++
	b := &durableBox{d: d, id: "dbox" + strconv.Itoa(d.n), labels: spec.Labels, stdinR: r, stdinW: w, ended: make(chan struct{})}
	if d.boxes == nil {
		d.boxes = map[string]*durableBox{}
	}
	d.boxes[b.id] = b
	d.mu.Unlock()
	go b.serve()
	return b.attach(), nil
}

func (d *durableDriver) FindBoxes(_ context.Context, labels map[string]string) ([]FoundBox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []FoundBox
	for _, b := range d.boxes {
		if !b.isEnded() && hasLabels(b.labels, labels) {
			out = append(out, FoundBox{ID: b.id, Labels: b.labels})
		}
	}
	return out, nil
}

func (d *durableDriver) Attach(_ context.Context, id string) (Box, error) {
	d.mu.Lock()
	b := d.boxes[id]
	d.mu.Unlock()
	if b == nil || b.isEnded() {
		return nil, &EngineError{Msg: "no such box"}
	}
	return b.attach(), nil
}

// freeze plays the death of the server that holds the handles given out
// so far.
func (d *durableDriver) freeze() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.boxes {
		b.mu.Lock()
		if b.cur != nil {
			b.cur.frozen = true
		}
		b.mu.Unlock()
	}
}

func (d *durableDriver) box(id string) *durableBox {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.boxes[id]
}

type durableBox struct {
	d      *durableDriver
	id     string
	labels map[string]string
	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	ended  chan struct{}

	mu      sync.Mutex
	out     *io.PipeWriter
	cur     *durableAttach
	endOnce sync.Once
	job     *durableJob
	removed bool
}

type durableJob struct {
	id   string
	done chan struct{}
	rep  *initproto.Report
}

func (b *durableBox) end() {
	b.endOnce.Do(func() {
		close(b.ended)
		_ = b.stdinW.Close()
		b.mu.Lock()
		if b.out != nil {
			_ = b.out.Close()
		}
		b.mu.Unlock()
	})
}

func (b *durableBox) isEnded() bool {
	select {
	case <-b.ended:
		return true
	default:
		return false
	}
}

func (b *durableBox) attach() *durableAttach {
	r, w := io.Pipe()
	a := &durableAttach{b: b, r: r}
	b.mu.Lock()
	if b.out != nil {
		_ = b.out.Close()
	}
	b.out, b.cur = w, a
	b.mu.Unlock()
	return a
}

func (b *durableBox) Write(p []byte) (int, error) {
	b.mu.Lock()
	w := b.out
	b.mu.Unlock()
	_, _ = w.Write(p)
	return len(p), nil
}

func (b *durableBox) serve() {
	defer b.end()
	rr := initproto.NewResetReader(b.stdinR)
	for {
		nonce, err := rr.Await()
		if err != nil {
			return // End, or the box killed
		}
		_, _ = b.Write(initproto.Ack(nonce))
		sess, err := yamux.Server(struct {
			io.Reader
			io.Writer
			io.Closer
		}{rr, b, io.NopCloser(nil)}, initproto.MuxConfig())
		if err != nil {
			return
		}
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				break
			}
			go b.stream(sess, st)
		}
	}
}

func (b *durableBox) stream(sess *yamux.Session, st *yamux.Stream) {
	defer st.Close()
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, 1<<20)
	if err != nil {
		return
	}
	b.mu.Lock()
	j := b.job
	switch {
	case h.Kind == initproto.StreamCollect && (j == nil || j.id != h.Run):
		j = nil
	case h.Kind == initproto.StreamJob && j == nil && initproto.JobBlobs(h.Job, blobs) == nil:
		j = &durableJob{id: h.Job.RunID, done: make(chan struct{})}
		b.job = j
		code := string(h.Job.Code)
		go func() {
			if ms, ok := strings.CutPrefix(code, "sleep:"); ok {
				n, _ := strconv.Atoi(ms)
				select {
				case <-time.After(time.Duration(n) * time.Millisecond):
				case <-b.ended:
					return
				}
				j.rep = &initproto.Report{Stdout: []byte("done"), Stderr: []byte{}, WallMs: int64(n)}
				close(j.done)
			}
		}()
	case h.Kind != initproto.StreamCollect:
		j = nil
	}
	b.mu.Unlock()
	if j == nil {
		return
	}
	select {
	case <-j.done:
	case <-sess.CloseChan():
		return
	}
	_ = initproto.SendReport(st, j.rep)
}

type durableAttach struct {
	b      *durableBox
	r      *io.PipeReader
	frozen bool // under b.mu
}

func (a *durableAttach) isFrozen() bool {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	return a.frozen
}

func (a *durableAttach) ID() string         { return a.b.id }
func (a *durableAttach) Started() time.Time { return time.Now() }
func (a *durableAttach) Exchange(context.Context) (Conn, error) {
	return durableConn{a}, nil
}
func (a *durableAttach) Kill() {
	if !a.isFrozen() {
		a.b.end()
	}
}
func (a *durableAttach) Verdict(context.Context, VerdictQuery) Verdict { return Verdict{} }
func (a *durableAttach) Alive() bool                                   { return !a.b.isEnded() }
func (a *durableAttach) Remove() {
	if a.isFrozen() {
		return
	}
	a.b.end()
	a.b.mu.Lock()
	a.b.removed = true
	a.b.mu.Unlock()
}

type durableConn struct{ a *durableAttach }

func (c durableConn) Read(p []byte) (int, error) {
	if c.a.isFrozen() {
		<-make(chan struct{}) // a dead server reads nothing more
	}
	return c.a.r.Read(p)
}
func (c durableConn) Write(p []byte) (int, error) {
	if c.a.isFrozen() {
		return 0, io.ErrClosedPipe
	}
	return c.a.b.stdinW.Write(p)
}
func (c durableConn) Close() error { return c.a.r.Close() }
func (c durableConn) Diag() string { return "" }

// sentAndDied starts job on a first server and plays that server's death
// once the job is sent: it returns the record OnSent gave.
func sentAndDied(t *testing.T, d *durableDriver, m *manifest.Manifest, job contract.Job) Detached {
	t.Helper()
	first := New(d, Options{Manifest: m})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan Detached, 1)
	go first.Run(ctx, RunRequest{Job: job, OnSent: func(rec Detached) {
		got <- rec
	}})
	var rec Detached
	select {
	case rec = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("OnSent was not called")
	}
	// OnSent is called just before the job is sent: let it reach the box.
	time.Sleep(100 * time.Millisecond)
	d.freeze()
	t.Cleanup(func() {
		cancel()
		_ = first.Close()
	})
	return rec
}

func adoptRunner(t *testing.T, d *durableDriver, m *manifest.Manifest) *BoxRunner {
	t.Helper()
	r := New(d, Options{Manifest: m})
	r.grace = 300 * time.Millisecond
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestAdopt: a restarted server adopts a run its dead predecessor sent,
// through the record OnSent gave: the result of a run over or still going
// is the one the dead server would have answered, and the box is removed;
// a box that is gone, or a record of another backend, answers that the
// result is lost; a cancelled adoption kills the box; none hangs.
func TestAdopt(t *testing.T) {
	m := testManifest(t, nil)
	t.Run("a run over", func(t *testing.T) {
		d := &durableDriver{}
		job := testJob(t, m, 30*time.Second)
		job.Code = "sleep:400"
		rec := sentAndDied(t, d, m, job)
		if rec.RunID != job.RunID || rec.BoxID == "" || rec.Isolation != d.Isolation() || rec.Sent.IsZero() || rec.Job.Code != job.Code {
			t.Fatalf("record %+v", rec)
		}
		time.Sleep(time.Second)
		res := adoptRunner(t, d, m).Adopt(context.Background(), rec)
		if res.Status != contract.StatusOK || res.Stdout != "done" || res.RunID != job.RunID || res.Isolation != d.Isolation() {
			t.Fatalf("adopted %+v %+v", res, res.Error)
		}
		waitFor(t, func() bool { b := d.box(rec.BoxID); b.mu.Lock(); defer b.mu.Unlock(); return b.removed })
	})
	t.Run("a run still going", func(t *testing.T) {
		d := &durableDriver{}
		job := testJob(t, m, 30*time.Second)
		job.Code = "sleep:1500"
		rec := sentAndDied(t, d, m, job)
		t0 := time.Now()
		res := adoptRunner(t, d, m).Adopt(context.Background(), rec)
		if res.Status != contract.StatusOK || res.Stdout != "done" || time.Since(t0) > 20*time.Second {
			t.Fatalf("adopted %+v %+v", res, res.Error)
		}
	})
	t.Run("a box gone and other records", func(t *testing.T) {
		d := &durableDriver{}
		r := adoptRunner(t, d, m)
		job := testJob(t, m, time.Second)
		for name, rec := range map[string]Detached{
			"gone":          {RunID: "r_gone", BoxID: "nope", Isolation: d.Isolation(), Job: job, Sent: time.Now()},
			"other backend": {RunID: "r_other", BoxID: "dbox1", Isolation: manifest.IsolationGVisor, Job: job, Sent: time.Now()},
			"no box":        {RunID: "r_nobox", Isolation: d.Isolation(), Job: job, Sent: time.Now()},
		} {
			res := r.Adopt(context.Background(), rec)
			if res.Status != contract.StatusError || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, "result is lost") || res.RunID != rec.RunID {
				t.Errorf("%s: %+v %+v", name, res, res.Error)
			}
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		d := &durableDriver{}
		job := testJob(t, m, 30*time.Second)
		job.Code = "hang"
		rec := sentAndDied(t, d, m, job)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		res := adoptRunner(t, d, m).Adopt(ctx, rec)
		if res.Error == nil || !strings.Contains(res.Error.Message, "cancelled") || time.Since(t0) > 4*time.Second {
			t.Fatalf("adopted %+v %+v", res, res.Error)
		}
		if !d.box(rec.BoxID).isEnded() {
			t.Fatal("the cancelled run's box still runs")
		}
	})
	t.Run("past its deadline", func(t *testing.T) {
		d := &durableDriver{}
		job := testJob(t, m, time.Second)
		job.Code = "hang"
		rec := sentAndDied(t, d, m, job)
		t0 := time.Now()
		res := adoptRunner(t, d, m).Adopt(context.Background(), rec)
		if res.Error == nil || res.Error.Kind != contract.KindTimeout || time.Since(t0) > 20*time.Second {
			t.Fatalf("adopted after %s: %+v %+v", time.Since(t0), res, res.Error)
		}
		if !d.box(rec.BoxID).isEnded() {
			t.Fatal("the run past its deadline still runs")
		}
	})
}

// TestAdoptCell: a restarted server adopts a session's cell its dead
// predecessor sent: the session is busy with the cell's run meanwhile, the
// cell's report is the result, and the session's state lives on.
func TestAdoptCell(t *testing.T) {
	d := &fakeSessionDriver{}
	m := testManifest(t, func(m *manifest.Manifest) { m.Sessions.Enabled = true })
	first := New(d, Options{Manifest: m})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		_ = first.Close()
	})
	info, e := first.OpenSession(ctx, SessionRequest{Language: testJob(t, m, 0).Language, Client: "c", Limits: m.SessionLimits()})
	if e != nil {
		t.Fatal(e.Message)
	}
	job := testJob(t, m, 30*time.Second)
	job.RunID, job.Code = "r_cell", "slow"
	got := make(chan Detached, 1)
	go first.RunInSession(ctx, info.ID, "c", RunRequest{Job: job, OnSent: func(rec Detached) { got <- rec }})
	rec := <-got
	if rec.Session != info.ID || rec.Client != "c" || rec.BoxID == "" {
		t.Fatalf("record %+v", rec)
	}
	time.Sleep(100 * time.Millisecond)
	d.freezeSessions()

	second := New(d, Options{Manifest: m})
	second.grace = 300 * time.Millisecond
	t.Cleanup(func() { _ = second.Close() })
	var busy atomic.Bool
	stop := make(chan struct{})
	go func() {
		for {
			for _, s := range second.ListSessions("c") {
				if s.Running == "r_cell" {
					busy.Store(true)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res := second.Adopt(context.Background(), rec)
	close(stop)
	if res.Status != contract.StatusOK || res.Stdout != "slow" || res.Session == nil || res.Session.ID != info.ID || res.Session.Call != 1 {
		t.Fatalf("adopted %+v %+v", res, res.Error)
	}
	if !busy.Load() {
		t.Error("the session did not say it was busy with the adopted cell")
	}
	job.RunID, job.Code = "r_next", "x"
	if next := second.RunInSession(context.Background(), info.ID, "c", RunRequest{Job: job}); next.Stdout != "slow;x" {
		t.Fatalf("the next cell: %+v %+v", next, next.Error)
	}
	// A cell the box holds no report of is lost; its session is not.
	never := rec
	never.RunID = "r_never"
	if res := second.Adopt(context.Background(), never); res.Error == nil || !strings.Contains(res.Error.Message, "result is lost") {
		t.Fatalf("adopting a cell the box never ran: %+v %+v", res, res.Error)
	}
	job.RunID, job.Code = "r_after", "y"
	if next := second.RunInSession(context.Background(), info.ID, "c", RunRequest{Job: job}); next.Stdout != "slow;x;y" {
		t.Fatalf("the session after a lost cell: %+v %+v", next, next.Error)
	}
	// A record whose session is gone says its result is lost.
	if err := second.CloseSession(context.Background(), info.ID, "c"); err != nil {
		t.Fatal(err.Message)
	}
	if again := second.Adopt(context.Background(), rec); again.Error == nil || !strings.Contains(again.Error.Message, "result is lost") {
		t.Fatalf("adopting a closed session's cell: %+v %+v", again, again.Error)
	}
}

// TestAdoptUnheld: a box that lives but holds no report of the run (it
// never got the job) answers that the run's result is lost, at once; a
// session's box lives on.
func TestAdoptUnheld(t *testing.T) {
	m := testManifest(t, nil)
	d := &durableDriver{}
	b, err := d.Start(context.Background(), BoxSpec{Labels: CurrentOwner().Labels(nil)})
	if err != nil {
		t.Fatal(err)
	}
	job := testJob(t, m, 30*time.Second)
	rec := Detached{RunID: "r_unheld", BoxID: b.ID(), Isolation: d.Isolation(), Job: job, Sent: time.Now()}
	t0 := time.Now()
	res := adoptRunner(t, d, m).Adopt(context.Background(), rec)
	if res.Error == nil || !strings.Contains(res.Error.Message, "result is lost") || time.Since(t0) > 10*time.Second {
		t.Fatalf("adopted after %s: %+v %+v", time.Since(t0), res, res.Error)
	}
}

// TestAdoptOnlyRunboxsBoxes: a record (read from the state directory, so
// possibly tampered with) naming a box that is not runbox's (no labels, or
// not managed), a session's box or another run's box is not adopted: the
// result is lost, and the box is neither attached to, killed nor removed.
func TestAdoptOnlyRunboxsBoxes(t *testing.T) {
	m := testManifest(t, nil)
	d := &durableDriver{}
	owner := CurrentOwner()
	start := func(labels map[string]string) *durableBox {
		b, err := d.Start(context.Background(), BoxSpec{Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		return d.box(b.ID())
	}
	r := adoptRunner(t, d, m)
	job := testJob(t, m, 30*time.Second)
	for name, b := range map[string]*durableBox{
		"unlabelled":    start(nil),
		"not managed":   start(map[string]string{LabelRunID: "r_tampered", LabelManaged: "false"}),
		"a session's":   start(owner.Labels(map[string]string{LabelSession: "k"})),
		"another run's": start(owner.Labels(map[string]string{LabelRunID: "r_other"})),
	} {
		b.mu.Lock()
		attached := b.cur
		b.mu.Unlock()
		rec := Detached{RunID: "r_tampered", BoxID: b.id, Isolation: d.Isolation(), Job: job, Sent: time.Now()}
		res := r.Adopt(context.Background(), rec)
		if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, "result is lost") {
			t.Errorf("%s box: %+v %+v", name, res, res.Error)
		}
		b.mu.Lock()
		touched := b.cur != attached || b.removed
		b.mu.Unlock()
		if touched || b.isEnded() {
			t.Errorf("%s box was attached to, killed or removed", name)
		}
	}
}
