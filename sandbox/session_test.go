package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

// fakeSessionDriver is the fake driver with session boxes: each speaks the
// real session channel (reset, ack, multiplexer) and keeps as its "state"
// the code of every call; "lose" loses it, "hang" runs until interrupted.
type fakeSessionDriver struct {
	fakeDriver
	smu   sync.Mutex
	sboxs []*fakeSessionBox
	// cells: the boxes serve a cells stream (initproto.StreamCells) as
	// runbox-init does; otherwise they close it unread, as an older
	// runbox-init does, and get each cell on a job stream.
	cells bool
	// lanes: the boxes also offer cell lanes (initproto.StreamLane) and
	// their attaches dial them, as runbox-init's direct socket and the
	// Docker driver do; laneDialFails: the dial fails.
	lanes, laneDialFails bool
	// hung is how many of the next attaches hang: what is written to
	// them never reaches the box, and they read nothing until closed.
	hung atomic.Int32
}

type fakeSessionBox struct {
	d        *fakeSessionDriver
	id       string
	labels   map[string]string
	stdinR   *io.PipeReader
	stdinW   *io.PipeWriter
	mu       sync.Mutex
	out      *io.PipeWriter
	dead     bool
	state    []string
	calls    int
	lost     string
	interrup chan struct{}
	// For the stream tests (session_streams_test.go): the kinds the last
	// job said the server serves, the go-ahead for what a cell does after
	// its report, and what came of it.
	kinds []string
	call  uint64
	after chan struct{}
	late  chan string
	// For the adoption tests (adopt_test.go): the cells' reports by run
	// id, and the attach a frozen (dead) server holds.
	kept map[string]*durableJob
	cur  *fakeSessionAttach
	// cellsStreams counts the cells streams opened to it, cellsJobs the
	// jobs they carried.
	cellsStreams, cellsJobs int
	// tokens are the lanes offered, by token; lanes counts those taken,
	// laneJobs the jobs they carried.
	tokens          map[string]*yamux.Session
	lanes, laneJobs int
}

func (d *fakeSessionDriver) Start(ctx context.Context, spec BoxSpec) (Box, error) {
	if !spec.Session {
		return d.fakeDriver.Start(ctx, spec)
	}
	r, w := io.Pipe()
	d.smu.Lock()
	b := &fakeSessionBox{d: d, id: "sbox" + string(rune('a'+len(d.sboxs))), labels: spec.Labels, stdinR: r, stdinW: w, interrup: make(chan struct{}, 1),
		after: make(chan struct{}, 1), late: make(chan string, 1)}
	d.sboxs = append(d.sboxs, b)
	d.smu.Unlock()
	d.started.Add(1)
	go b.serve()
	return b.attach(), nil
}

func (d *fakeSessionDriver) FindBoxes(_ context.Context, labels map[string]string) ([]FoundBox, error) {
	d.smu.Lock()
	defer d.smu.Unlock()
	var out []FoundBox
	for _, b := range d.sboxs {
		if !b.isDead() && hasLabels(b.labels, labels) {
			out = append(out, FoundBox{ID: b.id, Labels: b.labels})
		}
	}
	return out, nil
}

// hasLabels says whether have carries every label of want, as a
// Driver.FindBoxes matches them.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func (d *fakeSessionDriver) Attach(_ context.Context, id string) (Box, error) {
	d.smu.Lock()
	defer d.smu.Unlock()
	for _, b := range d.sboxs {
		if b.id == id && !b.isDead() {
			return b.attach(), nil
		}
	}
	return nil, &EngineError{Msg: "no such box"}
}

func (b *fakeSessionBox) isDead() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dead
}

// attach is a new attach: the box's output goes to it from now on.
func (b *fakeSessionBox) attach() *fakeSessionAttach {
	r, w := io.Pipe()
	a := &fakeSessionAttach{b: b, r: r, hung: b.d.hung.Add(-1) >= 0}
	b.mu.Lock()
	if b.out != nil {
		_ = b.out.Close()
	}
	b.out, b.cur = w, a
	b.mu.Unlock()
	return a
}

func (b *fakeSessionBox) Write(p []byte) (int, error) {
	b.mu.Lock()
	w := b.out
	b.mu.Unlock()
	if w != nil {
		_, _ = w.Write(p)
	}
	return len(p), nil
}

func (b *fakeSessionBox) serve() {
	rr := initproto.NewResetReader(b.stdinR)
	epoch := 0
	var emu sync.Mutex
	for {
		nonce, err := rr.Await()
		if err != nil {
			return
		}
		emu.Lock()
		epoch++
		mine := epoch
		_, _ = b.Write(initproto.Ack(nonce))
		emu.Unlock()
		w := writerFunc(func(p []byte) (int, error) {
			emu.Lock()
			defer emu.Unlock()
			if mine != epoch {
				return 0, io.ErrClosedPipe
			}
			return b.Write(p)
		})
		sess, err := yamux.Server(struct {
			io.Reader
			io.Writer
			io.Closer
		}{rr, w, io.NopCloser(nil)}, initproto.MuxConfig())
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

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (b *fakeSessionBox) stream(sess *yamux.Session, st *yamux.Stream) {
	defer st.Close()
	br := bufio.NewReaderSize(st, 64<<10)
	var h initproto.Header
	blobs, err := initproto.Receive(br, &h, 1<<20)
	if err != nil {
		return
	}
	if h.Kind == initproto.StreamCells {
		if !b.d.cells {
			return
		}
		b.mu.Lock()
		b.cellsStreams++
		b.mu.Unlock()
		// Cell after cell, each answered on the stream, which stays open.
		for err == nil && h.Kind == initproto.StreamCells && initproto.JobBlobs(h.Job, blobs) == nil {
			b.mu.Lock()
			b.cellsJobs++
			b.mu.Unlock()
			b.cell(sess, st, h.Job)
			h = initproto.Header{}
			blobs, err = initproto.Receive(br, &h, 1<<20)
		}
		return
	}
	if h.Kind == initproto.StreamInterrupt {
		b.interrup <- struct{}{}
		return
	}
	if h.Kind == initproto.StreamLane {
		if !b.d.lanes {
			return
		}
		token := fmt.Sprintf("%016d", time.Now().UnixNano()%1e16)
		b.mu.Lock()
		if b.tokens == nil {
			b.tokens = map[string]*yamux.Session{}
		}
		b.tokens[token] = sess
		b.mu.Unlock()
		_ = initproto.Send(st, initproto.Header{Kind: initproto.StreamLane}, []byte(token))
		return
	}
	if h.Kind == initproto.StreamPeek {
		b.mu.Lock()
		so := strings.Join(b.state, ";")
		b.mu.Unlock()
		_ = initproto.SendPeek(st, &initproto.Peek{Running: true, Stdout: []byte(so), StdoutBytes: int64(len(so)), Stderr: []byte{}})
		return
	}
	if h.Kind == initproto.StreamCollect {
		b.mu.Lock()
		j := b.kept[h.Run]
		b.mu.Unlock()
		if j != nil {
			select {
			case <-j.done:
				_ = initproto.SendReport(st, j.rep)
			case <-sess.CloseChan():
			}
		}
		return
	}
	if initproto.JobBlobs(h.Job, blobs) != nil {
		return
	}
	code := string(h.Job.Code)
	if b.streams(sess, st, h.Job) {
		return
	}
	if code == "script" && b.d.behave != nil {
		// A one-off box's script (fake_test.go), played as a cell: the
		// cell runs on until the channel ends, as a hung one would.
		b.d.behave(sess, st, h.Job)
		<-sess.CloseChan()
		return
	}
	b.cell(sess, st, h.Job)
}

// serveLane is a lane's box end: its hello, then cell after cell, until
// it or the channel that offered it ends.
func (b *fakeSessionBox) serveLane(c net.Conn) {
	defer c.Close()
	token, _, err := initproto.ReadLaneHello(c)
	if err != nil {
		return
	}
	b.mu.Lock()
	sess := b.tokens[string(token)]
	delete(b.tokens, string(token))
	b.mu.Unlock()
	if sess == nil {
		return
	}
	go func() {
		<-sess.CloseChan()
		_ = c.Close()
	}()
	if _, err := c.Write(initproto.Ack(token)); err != nil {
		return
	}
	b.mu.Lock()
	b.lanes++
	b.mu.Unlock()
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		var h initproto.Header
		blobs, err := initproto.Receive(br, &h, 1<<20)
		if err != nil || h.Kind != initproto.StreamCells || initproto.JobBlobs(h.Job, blobs) != nil {
			return
		}
		b.mu.Lock()
		b.laneJobs++
		b.mu.Unlock()
		b.cell(sess, c, h.Job)
	}
}

// cell runs a job of the plain kinds (its code kept as state, "lose",
// "hang", "slow") and answers its report on st.
func (b *fakeSessionBox) cell(sess *yamux.Session, st io.Writer, job *initproto.Job) {
	code := string(job.Code)
	j := &durableJob{id: job.RunID, done: make(chan struct{})}
	if code == "slow" {
		// A long cell: its report is kept for a server that adopts it.
		b.mu.Lock()
		if b.kept == nil {
			b.kept = map[string]*durableJob{}
		}
		b.kept[j.id] = j
		b.mu.Unlock()
		time.Sleep(time.Second)
	}
	defer func() { close(j.done) }()
	b.mu.Lock()
	b.calls++
	rep := &initproto.Report{Session: &initproto.SessionState{Calls: b.calls}, Stderr: []byte{}}
	j.rep = rep
	switch {
	case b.lost != "":
	case code == "lose":
		b.lost = "the interpreter ran out of memory and was killed"
		rep.OOMKills = 1
		rep.ExitCode = 137
	case code == "hang":
		b.mu.Unlock()
		<-b.interrup
		b.mu.Lock()
		rep.Session.Interrupted = true
		rep.ExitCode = 130
	default:
		b.state = append(b.state, code)
	}
	rep.Session.Lost = b.lost
	rep.Stdout = []byte(strings.Join(b.state, ";"))
	b.mu.Unlock()
	_ = initproto.SendReport(st, rep)
}

type fakeSessionAttach struct {
	b *fakeSessionBox
	r *io.PipeReader
	// frozen: the server that holds this attach is dead (under b.mu).
	frozen bool
	// hung: nothing written to this attach reaches the box.
	hung bool
}

func (a *fakeSessionAttach) isFrozen() bool {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	return a.frozen
}

// freezeSessions plays the death of the server that holds the session
// boxes' attaches so far.
func (d *fakeSessionDriver) freezeSessions() {
	d.smu.Lock()
	defer d.smu.Unlock()
	for _, b := range d.sboxs {
		b.mu.Lock()
		if b.cur != nil {
			b.cur.frozen = true
		}
		b.mu.Unlock()
	}
}

func (a *fakeSessionAttach) ID() string         { return a.b.id }
func (a *fakeSessionAttach) Started() time.Time { return time.Now() }
func (a *fakeSessionAttach) Exchange(context.Context) (Conn, error) {
	return fakeSessionConn{a}, nil
}
func (a *fakeSessionAttach) Kill() {
	if a.isFrozen() {
		return
	}
	a.b.mu.Lock()
	a.b.dead = true
	a.b.mu.Unlock()
	_ = a.b.stdinW.Close()
}
func (a *fakeSessionAttach) Verdict(context.Context, VerdictQuery) Verdict { return Verdict{} }
func (a *fakeSessionAttach) Alive() bool                                   { return !a.b.isDead() }
func (a *fakeSessionAttach) Remove() {
	if a.isFrozen() {
		return
	}
	a.Kill()
	a.b.d.removed.Add(1)
}

type fakeSessionConn struct{ a *fakeSessionAttach }

func (c fakeSessionConn) Read(p []byte) (int, error) {
	if c.a.isFrozen() {
		<-make(chan struct{}) // a dead server reads nothing more
	}
	return c.a.r.Read(p)
}
func (c fakeSessionConn) Write(p []byte) (int, error) {
	if c.a.isFrozen() {
		return 0, io.ErrClosedPipe
	}
	if c.a.hung {
		return len(p), nil
	}
	return c.a.b.stdinW.Write(p)
}
func (c fakeSessionConn) Close() error { return c.a.r.Close() }
func (c fakeSessionConn) Diag() string { return "" }

// DialLane is a new connection to the box, as the Docker driver's direct
// channel dials one.
func (c fakeSessionConn) DialLane(context.Context) (net.Conn, error) {
	if c.a.b.d.laneDialFails {
		return nil, errors.New("no lane today")
	}
	server, box := net.Pipe()
	go c.a.b.serveLane(box)
	return server, nil
}

func sessionRunner(t *testing.T, edit func(*manifest.Manifest)) (*fakeSessionDriver, *BoxRunner, *manifest.Manifest) {
	t.Helper()
	d := &fakeSessionDriver{}
	m := testManifest(t, edit)
	return d, newTestRunnerOf(t, d, &d.fakeDriver, m), m
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	t.Run("state persists, another client and an unknown id find nothing, close ends it", func(t *testing.T) {
		_, r, m := sessionRunner(t, nil)
		lang, _ := m.Language("python")
		info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "alice", Limits: m.SessionLimits()})
		if fail != nil {
			t.Fatal(fail)
		}
		if len(info.ID) < 30 || !strings.HasPrefix(info.ID, "s_") || info.ExpiresAt.IsZero() {
			t.Fatalf("info %+v", info)
		}
		job := testJob(t, m, time.Second)
		job.Code = "x = 1"
		r.RunInSession(ctx, info.ID, "alice", RunRequest{Job: job})
		job.Code = "y = 2"
		res := r.RunInSession(ctx, info.ID, "alice", RunRequest{Job: job})
		if res.Status != contract.StatusOK || res.Stdout != "x = 1;y = 2" || res.Session == nil || res.Session.Call != 2 || res.Session.State != contract.SessionAlive {
			t.Fatalf("second call: %+v %+v", res, res.Session)
		}
		if res := r.RunInSession(ctx, info.ID, "mallory", RunRequest{Job: job}); res.Error == nil || res.Error.Kind != contract.KindSessionNotFound {
			t.Fatalf("a foreign client: %+v", res.Error)
		}
		if res := r.RunInSession(ctx, "s_nonsense", "alice", RunRequest{Job: job}); res.Error == nil || res.Error.Kind != contract.KindSessionNotFound {
			t.Fatalf("an unknown id: %+v", res.Error)
		}
		if got := r.ListSessions("alice"); len(got) != 1 || got[0].Calls != 2 {
			t.Fatalf("list %+v", got)
		}
		if got := r.ListSessions("mallory"); len(got) != 0 {
			t.Fatalf("mallory sees %+v", got)
		}
		if fail := r.CloseSession(ctx, info.ID, "mallory"); fail == nil || fail.Kind != contract.KindSessionNotFound {
			t.Fatalf("mallory closed it: %+v", fail)
		}
		if fail := r.CloseSession(ctx, info.ID, "alice"); fail != nil {
			t.Fatal(fail)
		}
		if res := r.RunInSession(ctx, info.ID, "alice", RunRequest{Job: job}); res.Error == nil || res.Error.Kind != contract.KindSessionNotFound {
			t.Fatalf("a closed id: %+v", res.Error)
		}
	})

	t.Run("a lost session says so, then session_lost on the next call", func(t *testing.T) {
		_, r, m := sessionRunner(t, nil)
		lang, _ := m.Language("python")
		// The session's own memory limit, not a one-off box's, is the one
		// the answer names.
		sl := m.SessionLimits()
		sl.Memory = m.Limits.Memory / 2
		info, _ := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: sl})
		job := testJob(t, m, time.Second)
		job.Code = "lose"
		res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
		if res.Error == nil || res.Error.Kind != contract.KindOOM || res.Session.State != contract.SessionLost || !strings.Contains(res.Error.Hint, "new session") {
			t.Fatalf("losing call: %+v %+v", res.Error, res.Session)
		}
		if !strings.Contains(res.Error.Message, sl.Memory.String()) || strings.Contains(res.Error.Message, m.Limits.Memory.String()) {
			t.Fatalf("the OOM names the session's %s: %q", sl.Memory, res.Error.Message)
		}
		for range 2 {
			if res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job}); res.Error == nil || res.Error.Kind != contract.KindSessionLost || !strings.Contains(res.Error.Message, "memory") {
				t.Fatalf("next call: %+v", res.Error)
			}
		}
	})

	t.Run("a cancelled call interrupts the cell and keeps the session", func(t *testing.T) {
		_, r, m := sessionRunner(t, nil)
		lang, _ := m.Language("python")
		info, _ := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
		job := testJob(t, m, 10*time.Second)
		job.Code = "kept"
		r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		job.Code = "hang"
		res := r.RunInSession(cctx, info.ID, "c", RunRequest{Job: job})
		if res.Error == nil || !strings.Contains(res.Error.Message, "interrupted") || res.Session.State != contract.SessionAlive {
			t.Fatalf("cancelled: %+v %+v", res.Error, res.Session)
		}
		job.Code = "after"
		if res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job}); res.Stdout != "kept;after" {
			t.Fatalf("after: %+v", res)
		}
	})

	t.Run("a restarted server finds the session by its labels", func(t *testing.T) {
		d, r, m := sessionRunner(t, nil)
		lang, _ := m.Language("python")
		info, _ := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
		job := testJob(t, m, time.Second)
		job.Code = "before"
		r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
		// A second runner over the same platform: the first one's
		// memory is not shared, the box is.
		r2 := New(d, Options{Manifest: m})
		defer r2.Close()
		job.Code = "after"
		res := r2.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
		if res.Stdout != "before;after" || res.Session.Call != 2 {
			t.Fatalf("adopted: %+v %+v", res.Error, res.Session)
		}
		if res := r2.RunInSession(ctx, info.ID, "other", RunRequest{Job: job}); res.Error == nil || res.Error.Kind != contract.KindSessionNotFound {
			t.Fatalf("another client: %+v", res.Error)
		}
		r.sessionsOf().mu.Lock()
		delete(r.sessionsOf().live, sessionKey(info.ID)) // r2 owns it now
		r.sessionsOf().mu.Unlock()
		r.alive.Add(-1)
	})

	t.Run("concurrent opens never pass the per-client cap", func(t *testing.T) {
		_, r, m := sessionRunner(t, func(m *manifest.Manifest) { m.Sessions.MaxPerClient = 2 })
		lang, _ := m.Language("bash")
		var wg sync.WaitGroup
		var mu sync.Mutex
		opened := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "x", Limits: m.SessionLimits()}); fail == nil {
					mu.Lock()
					opened++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if opened != 2 || len(r.ListSessions("x")) != 2 {
			t.Fatalf("%d opened, %d listed", opened, len(r.ListSessions("x")))
		}
	})

	t.Run("limits: per client and per server; idle TTL ends a session", func(t *testing.T) {
		_, r, m := sessionRunner(t, func(m *manifest.Manifest) {
			m.Sessions.MaxPerClient, m.Sessions.MaxOpen = 1, 2
		})
		old := sessionTick
		sessionTick = 50 * time.Millisecond
		defer func() { sessionTick = old }()
		lang, _ := m.Language("python")
		a, _ := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "a", Limits: m.SessionLimits(), IdleTTL: 300 * time.Millisecond})
		if _, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "a", Limits: m.SessionLimits()}); fail == nil || fail.Limit != contract.LimitBusy {
			t.Fatalf("a second session of a: %+v", fail)
		}
		if _, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "b", Limits: m.SessionLimits()}); fail != nil {
			t.Fatal(fail)
		}
		if _, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()}); fail == nil || !strings.Contains(fail.Message, "server") {
			t.Fatalf("past the server's cap: %+v", fail)
		}
		time.Sleep(time.Second)
		if res := r.RunInSession(ctx, a.ID, "a", RunRequest{Job: testJob(t, m, time.Second)}); res.Error == nil || res.Error.Kind != contract.KindSessionNotFound {
			t.Fatalf("after the idle TTL: %+v", res.Error)
		}
	})

	t.Run("a call that comes as the idle TTL ends finds the session closed or open, never lost", func(t *testing.T) {
		_, r, m := sessionRunner(t, func(m *manifest.Manifest) { m.Sessions.MaxPerClient, m.Sessions.MaxOpen = 64, 64 })
		old := sessionTick
		sessionTick = time.Millisecond
		defer func() { sessionTick = old }()
		lang, _ := m.Language("python")
		job := testJob(t, m, 5*time.Second)
		for i := range 200 {
			info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "a", Limits: m.SessionLimits(), IdleTTL: 20 * time.Millisecond})
			if fail != nil {
				t.Fatal(fail)
			}
			time.Sleep(time.Duration(15+i%10) * time.Millisecond)
			res := r.RunInSession(ctx, info.ID, "a", RunRequest{Job: job})
			if res.Error != nil && res.Error.Kind != contract.KindSessionNotFound {
				t.Fatalf("call %d: %+v", i, res.Error)
			}
			_ = r.CloseSession(ctx, info.ID, "a")
		}
	})
}

// A box that knows cells streams gets all of a channel's cells on one,
// its state carried from cell to cell; an interrupted cell's report comes
// on it and the next cell follows; a lost channel's next call opens
// another channel and another cells stream.
func TestSessionCellsStream(t *testing.T) {
	ctx := context.Background()
	d, r, m := sessionRunner(t, nil)
	d.cells = true
	lang, _ := m.Language("python")
	info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
	if fail != nil {
		t.Fatal(fail)
	}
	call := func(ctx context.Context, code string) contract.Result {
		job := testJob(t, m, 5*time.Second)
		job.Code = code
		return r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
	}
	var want []string
	for i := range 50 {
		code := fmt.Sprint("x", i)
		want = append(want, code)
		if res := call(ctx, code); res.Status != contract.StatusOK || res.Stdout != strings.Join(want, ";") || res.Session.Call != i+1 {
			t.Fatalf("cell %d: %+v %q %+v", i, res.Error, res.Stdout, res.Session)
		}
	}
	box := d.sboxs[0]
	counts := func() (int, int) {
		box.mu.Lock()
		defer box.mu.Unlock()
		return box.cellsStreams, box.cellsJobs
	}
	if streams, jobs := counts(); streams != 1 || jobs != 50 {
		t.Fatalf("50 cells came on %d cells streams as %d jobs", streams, jobs)
	}
	interruptThenNext(t, call, ";x49;after")
	if streams, jobs := counts(); streams != 1 || jobs != 52 {
		t.Fatalf("52 cells came on %d cells streams as %d jobs", streams, jobs)
	}
}

// interruptThenNext cancels a cell that hangs, which is interrupted with
// its session alive, then runs the cell "after", whose state must end
// with want.
func interruptThenNext(t *testing.T, call func(context.Context, string) contract.Result, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if res := call(ctx, "hang"); res.Error == nil || !strings.Contains(res.Error.Message, "interrupted") || res.Session.State != contract.SessionAlive {
		t.Fatalf("cancelled: %+v %+v", res.Error, res.Session)
	}
	if res := call(context.Background(), "after"); res.Status != contract.StatusOK || !strings.HasSuffix(res.Stdout, want) {
		t.Fatalf("after the interrupt: %+v %q", res.Error, res.Stdout)
	}
}

// A box whose channel can dial a lane gets its cells on it, the channel's
// one lane; an interrupt reaches a cell the lane waits on, and the next
// cell follows on the lane; a channel opened again (its box reset by
// another server) opens a lane of its own. A box that offers no lane, or
// whose lane cannot be dialed, gets its cells on a cells stream.
func TestSessionLane(t *testing.T) {
	ctx := context.Background()
	open := func(r *BoxRunner, m *manifest.Manifest) (contract.SessionInfo, func(context.Context, string) contract.Result) {
		lang, _ := m.Language("python")
		info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
		if fail != nil {
			t.Fatal(fail)
		}
		return info, func(ctx context.Context, code string) contract.Result {
			job := testJob(t, m, 5*time.Second)
			job.Code = code
			return r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
		}
	}
	counts := func(b *fakeSessionBox) [3]int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return [3]int{b.lanes, b.laneJobs, b.cellsJobs}
	}

	d, r, m := sessionRunner(t, nil)
	d.cells, d.lanes = true, true
	info, call := open(r, m)
	for i := range 20 {
		if res := call(ctx, fmt.Sprint("x", i)); res.Status != contract.StatusOK || res.Session.Call != i+1 || !strings.HasSuffix(res.Stdout, fmt.Sprint("x", i)) {
			t.Fatalf("cell %d: %+v %q %+v", i, res.Error, res.Stdout, res.Session)
		}
	}
	box := d.sboxs[0]
	if got := counts(box); got != [3]int{1, 20, 0} {
		t.Fatalf("20 cells: %d lanes carried %d jobs, cells streams %d", got[0], got[1], got[2])
	}
	interruptThenNext(t, call, ";x19;after")
	if got := counts(box); got != [3]int{1, 22, 0} {
		t.Fatalf("22 cells: %d lanes carried %d jobs, cells streams %d", got[0], got[1], got[2])
	}
	// Another server's reset ends this channel while idle: the next call
	// opens a channel, and a lane, again.
	ls, _ := r.sessionsOf().find(ctx, info.ID, "c")
	if _, err := d.Attach(ctx, box.id); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); !ls.ch.closed(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the channel did not end with its attach")
		}
	}
	if res := call(ctx, "again"); res.Status != contract.StatusOK || !strings.HasSuffix(res.Stdout, ";after;again") {
		t.Fatalf("on a new channel: %+v %q", res.Error, res.Stdout)
	}
	if got := counts(box); got[0] != 2 || got[1] != 23 {
		t.Fatalf("after the reset: %d lanes carried %d jobs", got[0], got[1])
	}

	for _, dialFails := range []bool{false, true} {
		d, r, m := sessionRunner(t, nil)
		d.cells, d.lanes, d.laneDialFails = true, dialFails, dialFails
		_, call := open(r, m)
		for i := range 3 {
			if res := call(ctx, fmt.Sprint("y", i)); res.Status != contract.StatusOK || res.Session.Call != i+1 {
				t.Fatalf("no lane (offered %v), cell %d: %+v %+v", dialFails, i, res.Error, res.Session)
			}
		}
		if got := counts(d.sboxs[0]); got != [3]int{0, 0, 3} {
			t.Fatalf("no lane (offered %v): %d lanes carried %d jobs, cells streams %d", dialFails, got[0], got[1], got[2])
		}
	}
}

// A box that does not know cells streams (an older runbox-init) closes
// the stream unread: each cell goes on a job stream of its own, and runs
// once.
func TestSessionCellsStreamUnknown(t *testing.T) {
	ctx := context.Background()
	d, r, m := sessionRunner(t, nil)
	lang, _ := m.Language("python")
	info, _ := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
	job := testJob(t, m, 5*time.Second)
	for i, code := range []string{"a", "b", "c"} {
		job.Code = code
		res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
		if res.Status != contract.StatusOK || res.Session.Call != i+1 || !strings.HasSuffix(res.Stdout, code) {
			t.Fatalf("cell %s: %+v %q %+v", code, res.Error, res.Stdout, res.Session)
		}
	}
	if res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job}); res.Stdout != "a;b;c;c" {
		t.Fatalf("state %q: a cell ran twice or not at all", res.Stdout)
	}
	if box := d.sboxs[0]; box.cellsStreams != 0 {
		t.Fatalf("the box served %d cells streams", box.cellsStreams)
	}
}

// A session box whose first attach never carries the reset (a busy node's
// attach that never came up) is attached again, and the session opens.
// One that stays silent on the second attach too fails the open, and its
// box goes.
func TestSessionOpenAttachesAgain(t *testing.T) {
	defer func(w time.Duration) { sessionAnswerWait = w }(sessionAnswerWait)
	sessionAnswerWait = 50 * time.Millisecond
	ctx := context.Background()
	d, r, m := sessionRunner(t, nil)
	lang, _ := m.Language("python")
	d.hung.Store(1)
	info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
	if fail != nil {
		t.Fatal(fail)
	}
	job := testJob(t, m, 5*time.Second)
	job.Code = "x"
	if res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job}); res.Status != contract.StatusOK || res.Stdout != "x" {
		t.Fatalf("the first cell: %+v %q", res.Error, res.Stdout)
	}
	d.hung.Store(2)
	if _, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()}); fail == nil || !strings.Contains(fail.Message, "did not answer") {
		t.Fatalf("a box that never answers: %+v", fail)
	}
	if !d.sboxs[1].isDead() {
		t.Fatal("the silent box was left running")
	}
}
