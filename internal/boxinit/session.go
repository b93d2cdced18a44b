//go:build linux

package boxinit

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/pymain"
)

// The persistent interpreters' drivers, one per error format.
var (
	//go:embed drivers/python.py
	pythonDriver string
	//go:embed drivers/node.js
	nodeDriver string
	//go:embed drivers/bash.sh
	bashDriver string
)

// driverArgv is the command that runs a session's interpreter.
func driverArgv(s initproto.Session) ([]string, error) {
	if s.Interpreter == "" {
		return nil, errors.New("a session without an interpreter")
	}
	switch s.Driver {
	case "python":
		return []string{s.Interpreter, "-c", pymain.Source + pythonDriver}, nil
	case "node":
		// --expose-internals: the REPL's own rewrite of top-level await.
		return []string{s.Interpreter, "--expose-internals", "-e", nodeDriver}, nil
	case "typescript":
		// The same driver; its cells are TypeScript, checked and
		// transpiled by the runner runbox-init wrote (initproto.RunnerLib).
		return []string{s.Interpreter, "--expose-internals", "-e", nodeDriver, initproto.TypeScriptRunner}, nil
	case "bash":
		return []string{s.Interpreter, "-c", bashDriver, "bash"}, nil
	}
	return nil, fmt.Errorf("no session driver for %q", s.Driver)
}

const (
	// interruptGrace is how long an interrupted cell may take to stop
	// before the interpreter is killed (and the session lost).
	interruptGrace = 3 * time.Second
	// interruptResend is when an interrupt is sent again to a cell that
	// has not stopped.
	interruptResend = time.Second
	// markerWait bounds the wait for a finished cell's markers on the
	// stream whose end was not seen yet (a cell that closed its stdout).
	markerWait = time.Second
)

// session is a session box's interpreter and its state.
type session struct {
	spec initproto.Session
	opts Options
	r    *childReaper
	p    *process
	out  *cellOut
	errs *cellOut

	mu          sync.Mutex // one cell at a time
	calls       int
	lost        string
	interrupt   chan struct{}
	interrupted bool // the running cell was interrupted
	// lanes are the cell lanes its channels offered (serveLane).
	lanes lanes
	// stages notes the running cell's stage times (a traced job).
	stages *stages
	// live shows the running cell's output to a peek.
	live liveOutput

	// cells are the last cells' outcomes by run id, for a server that
	// adopts a cell its dead predecessor sent (a collect stream).
	cellsMu sync.Mutex
	cells   []*kept
}

// keptCells bounds the cells' outcomes a session keeps: the running one
// and a few before it, for a restarted server that comes late.
const keptCells = 4

// keep registers a cell's outcome under its run id (none: not kept).
func (s *session) keep(id string) *kept {
	k := newKept(id)
	if id == "" {
		return k
	}
	s.cellsMu.Lock()
	defer s.cellsMu.Unlock()
	s.cells = append(s.cells, k)
	if len(s.cells) > keptCells {
		s.cells = s.cells[1:]
	}
	return k
}

// kept is the outcome of the cell of run id, nil when the session holds
// none.
func (s *session) kept(id string) *kept {
	s.cellsMu.Lock()
	defer s.cellsMu.Unlock()
	for _, k := range s.cells {
		if id != "" && k.id == id {
			return k
		}
	}
	return nil
}

// newSession starts the interpreter; a failure to start is the session's
// loss, said on its first call.
func newSession(spec initproto.Session, opts Options) *session {
	var argv []string
	var err error
	s := &session{spec: spec, r: newChildReaper(), out: &cellOut{}, errs: &cellOut{}, interrupt: make(chan struct{}, 1)}
	s.opts, err = opts.withDefaults(spec.Dir)
	if err == nil {
		argv, err = driverArgv(spec)
	}
	if err == nil {
		s.p, err = start(s.r, s.opts.Self, argv, spec.Env, spec.Dir, spec.CPUSeconds, spec.NProc, true, s.out, s.errs)
	}
	if err != nil {
		s.lost = "the interpreter could not be started: " + err.Error()
	}
	return s
}

// run runs one job as a cell of the interpreter, through the call
// algorithm (call) as a one-off job runs; host is the channel the job came
// on, the way of the cell's box services to the server (a reset since the
// last cell replaced it).
func (s *session) run(job *initproto.Job, host *Host) (*initproto.Report, [][]byte) {
	return s.runStaged(job, host, newStages(job))
}

// runStaged is run noting the cell's stage times in st (nil: none).
func (s *session) runStaged(job *initproto.Job, host *Host, st *stages) (*initproto.Report, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	state := &initproto.SessionState{Calls: s.calls}
	if s.lost != "" {
		state.Lost = s.lost
		return &initproto.Report{OOMKills: -1, Session: state, Stdout: []byte{}, Stderr: []byte{}}, nil
	}
	if s.p.startError() != "" || !s.p.alive(s.r) {
		s.readers()
		s.lose("the interpreter ended before its first call")
		state.Lost = s.lost
		return &initproto.Report{OOMKills: -1, Session: state, StartError: s.p.startError()}, nil
	}
	opts := s.opts
	opts.Host = host.ForCall(job.Call)
	opts.stages, s.stages = st, st
	defer func() { s.stages = nil }()
	s.interrupted = false
	rep, contents := call(context.Background(), job, opts, program{replace: true, pid: s.p.pid, run: s.cell})
	rep.Session = state
	if rep.OOMKills > 0 && s.lost != "" && !rep.TimedOut {
		s.lost = "the interpreter ran out of memory and was killed"
	}
	state.Lost = s.lost
	state.Interrupted = s.interrupted && s.lost == ""
	return rep, contents
}

// cell sends the job to the interpreter as a cell and waits for its end:
// the driver's marker, the deadline (which loses the session), an
// interrupt, or the interpreter's death.
func (s *session) cell(_ context.Context, job *initproto.Job) runResult {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	marker := "\x1erbx" + hex.EncodeToString(nonce[:]) + "\x1e"
	res := newRunResult(job)
	outSeen := s.out.begin(res.stdout, []byte(marker), false)
	errSeen := s.errs.begin(res.stderr, []byte(marker), true)
	s.live.set(res.stdout, res.stderr)
	defer s.live.set(nil, nil)
	select {
	case <-s.interrupt: // meant for a cell that has ended
	default:
	}

	// The cell's request and its stdin go on the interpreter's descriptor
	// 4, a pipe: nothing of a cell is written to the box's writable space,
	// which the program may have filled. What the pipe takes at once is
	// written here (most often all of it, with no goroutine to start and
	// wake); the rest is written aside, as a cell may not read it and a
	// large stdin fills the pipe.
	begun := time.Now()
	ctlDone := make(chan error, 1)
	s.stages.mark("box: output capture set up")
	req := cellRequest(s.spec.Driver, job, marker)
	if n, err := writeNow(s.p.ctl, req); err != nil || n == len(req) {
		ctlDone <- err
	} else {
		go func() {
			_, err := s.p.ctl.Write(req[n:])
			ctlDone <- err
		}()
	}
	timer := time.NewTimer(time.Duration(job.TimeoutMs) * time.Millisecond)
	defer timer.Stop()
	var graceC, resendC <-chan time.Time
	finished := false
wait:
	for s.lost == "" {
		select {
		case err := <-ctlDone:
			if err != nil {
				s.lose("the interpreter stopped reading its cells")
			}
			ctlDone = nil
		case <-errSeen:
			finished = true
			break wait
		case <-s.r.mainDone:
			s.lose("")
		case <-timer.C:
			res.timedOut = true
			s.lose(fmt.Sprintf("the call ran past its %s timeout and the interpreter was killed", time.Duration(job.TimeoutMs)*time.Millisecond))
		case <-s.interrupt:
			s.interrupted = true
			s.signalInterrupt()
			graceC = time.After(interruptGrace)
			// Once more: a SIGINT that came before the driver took the
			// cell was dropped as a late one.
			resendC = time.After(interruptResend)
		case <-resendC:
			s.signalInterrupt()
		case <-graceC:
			s.lose("the interrupted call did not stop and the interpreter was killed")
		}
	}
	res.ended = time.Now()
	res.wall = res.ended.Sub(begun)
	s.stages.mark("box: interpreter exec (cell sent to end marker on stderr)")
	if finished {
		select {
		case <-outSeen:
		case <-time.After(markerWait):
		}
		res.exitCode, res.checkFailed = s.errs.status()
	} else {
		res.setStatus(s.r.mainStatus)
	}
	s.out.end()
	s.errs.end()
	return res
}

// writeNow writes what of p the pipe f takes without waiting: a short
// count and no error when it is full.
func writeNow(f *os.File, p []byte) (int, error) {
	c, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var werr error
	if err := c.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Write(int(fd), p)
			if werr != unix.EINTR {
				return true
			}
		}
	}); err != nil {
		return 0, err
	}
	if n < 0 {
		n = 0
	}
	if werr == unix.EAGAIN {
		werr = nil
	}
	return n, werr
}

// lose kills the interpreter and everything it started: the state is gone.
func (s *session) lose(why string) {
	if s.p != nil {
		killAll(s.p.pid)
		<-s.r.mainDone
		s.r.waitNoChildren(drainTimeout)
		s.readers()
	}
	if why == "" {
		why = "the interpreter exited"
		if st := s.r.mainStatus; st.Signaled() {
			why = "the interpreter was killed by " + st.Signal().String()
		} else if st.Exited() {
			why = fmt.Sprintf("the interpreter exited with status %d", st.ExitStatus())
		}
	}
	if s.lost == "" {
		s.lost = why
	}
}

func (s *session) readers() {
	if s.p != nil {
		waitTimeout(&s.p.readers, drainTimeout)
	}
}

// signalInterrupt sends SIGINT the way a terminal would: Python and Node
// handle it in the interpreter; bash's foreground command must get it too.
func (s *session) signalInterrupt() {
	if s.spec.Driver == "bash" {
		_ = syscall.Kill(-s.p.pid, syscall.SIGINT)
		return
	}
	_ = syscall.Kill(s.p.pid, syscall.SIGINT)
}

// interruptNow interrupts the running cell, if any.
func (s *session) interruptNow() {
	// Without the cell's lock: the interrupt must reach a running cell.
	select {
	case s.interrupt <- struct{}{}:
	default:
	}
}

// cellRequest is what a session's driver reads on descriptor 4 for one
// cell: a line naming the code and the marker, and the cell's stdin after
// it. The bash driver reads "length marker path" and that many characters
// of printf %b text (bash variables hold no NUL bytes); the Python driver
// reads "length marker path" and that many raw bytes (a split where a
// JSON decoder cost it more than the rest of the line's handling); the
// Node drivers read a JSON line and that many raw bytes. The marker has
// no space, and the path (the workspace and the language's plain file
// name) no newline.
func cellRequest(driver string, job *initproto.Job, marker string) []byte {
	switch driver {
	case "bash":
		in := printfEscape(job.Stdin)
		return []byte(fmt.Sprintf("%d %s %s\n%s", len(in), marker, job.CodePath, in))
	case "python":
		return append(fmt.Appendf(nil, "%d %s %s\n", len(job.Stdin), marker, job.CodePath), job.Stdin...)
	}
	b, _ := json.Marshal(map[string]any{"path": job.CodePath, "stdin": len(job.Stdin), "marker": marker})
	return append(append(b, '\n'), job.Stdin...)
}

// printfEscape encodes data as ASCII that bash's printf %b turns back
// into data: printable characters as they are, every other byte and the
// backslash as \xHH.
func printfEscape(data []byte) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(data))
	for _, c := range data {
		if c >= 0x20 && c < 0x7f && c != '\\' {
			b.WriteByte(c)
			continue
		}
		b.WriteString(`\x`)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// serveSession is a session box's side of the channel: it waits for a
// reset, answers it, and serves that channel's jobs one at a time until
// the next reset (a restarted server) or the end of stdin; then, with a
// relay, the relay's channels. With a direct socket (dl), its connections'
// channels are served beside stdin's.
func serveSession(in io.Reader, out io.Writer, s *session, rl *relay, dl *direct) int {
	serve := func(sess *yamux.Session) {
		host := NewHost(sess)
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			go serveSessionStream(sess, host, st, s)
		}
	}
	if dl != nil {
		go dl.channels(serve, s.serveLane)
	}
	_ = channelsOn(in, out, false, serve)
	// stdin ended: without a relay nobody can reach this box again.
	if rl != nil {
		_ = rl.channels(false, serve)
	}
	return 0
}

func serveSessionStream(sess *yamux.Session, host *Host, st *yamux.Stream, s *session) {
	defer st.Close()
	// Read through one buffer: a cells stream carries message after message.
	br := bufio.NewReaderSize(st, 64<<10)
	var h initproto.Header
	blobs, err := initproto.Receive(br, &h, maxJobBytes)
	if err != nil {
		return
	}
	switch h.Kind {
	case initproto.StreamInterrupt:
		s.interruptNow()
	case initproto.StreamPeek:
		servePeek(st, h, &s.live)
	case initproto.StreamExpose:
		serveExpose(st, h)
	case initproto.StreamJob:
		_ = s.serveCell(sess, host, st, h, blobs, true)
	case initproto.StreamCells:
		// Cell after cell on the one stream, until it or the channel ends.
		for s.serveCell(sess, host, st, h, blobs, false) == nil {
			h = initproto.Header{}
			if blobs, err = initproto.Receive(br, &h, maxJobBytes); err != nil || h.Kind != initproto.StreamCells {
				return
			}
		}
	case initproto.StreamCollect:
		if k := s.kept(h.Run); k != nil {
			_ = k.deliver(sess, st)
		}
	case initproto.StreamLane:
		_ = initproto.Send(st, initproto.Header{Kind: initproto.StreamLane}, s.lanes.offer(sess, host))
	}
}

// serveLane runs the cells a lane's connection c carries (internal/initproto
// lane.go) for the channel its token names, one after the other, each
// answered on c, until c or that channel ends. A token no channel of this
// box offered, or one already taken, gets no answer.
func (s *session) serveLane(c net.Conn, token []byte) {
	to, ok := s.lanes.take(token)
	if !ok {
		return
	}
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-to.sess.CloseChan():
			_ = c.Close()
		case <-ended:
		}
	}()
	if _, err := c.Write(initproto.Ack(token)); err != nil {
		return
	}
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		var h initproto.Header
		blobs, err := initproto.Receive(br, &h, maxJobBytes)
		if err != nil || h.Kind != initproto.StreamCells {
			return
		}
		if s.serveCell(to.sess, to.host, c, h, blobs, false) != nil {
			return
		}
	}
}

// lanes are the lanes a session's channels offered and no connection took
// yet, by token.
type lanes struct {
	mu      sync.Mutex
	offered []laneOffer
}

type laneOffer struct {
	token string
	sess  *yamux.Session
	host  *Host
}

// maxLaneOffers bounds the offers kept: a server takes its lane at once.
const maxLaneOffers = 4

// offer names a lane for the channel of sess with a new token.
func (l *lanes) offer(sess *yamux.Session, host *Host) []byte {
	token := make([]byte, initproto.LaneTokenSize)
	_, _ = rand.Read(token)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.offered = append(l.offered, laneOffer{token: string(token), sess: sess, host: host})
	if len(l.offered) > maxLaneOffers {
		l.offered = l.offered[1:]
	}
	return token
}

// take is the offer of token, once.
func (l *lanes) take(token []byte) (laneOffer, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.offered {
		if subtle.ConstantTimeCompare([]byte(o.token), token) == 1 {
			l.offered = append(l.offered[:i:i], l.offered[i+1:]...)
			return o, !o.sess.IsClosed()
		}
	}
	return laneOffer{}, false
}

// serveCell runs the job a message of st carries as a cell and answers its
// report on st (closing st after it when last), then sends its artifacts.
func (s *session) serveCell(sess *yamux.Session, host *Host, st io.WriteCloser, h initproto.Header, blobs [][]byte, last bool) error {
	if h.Job == nil || initproto.JobBlobs(h.Job, blobs) != nil {
		k := newKept("")
		k.finish(&initproto.Report{InitError: "a malformed job"}, nil)
		return k.send(sess, st, last)
	}
	// The cell runs to its end even when this channel is replaced
	// meanwhile (its server died): its outcome is kept for the next
	// server's collect stream.
	k := s.keep(h.Job.RunID)
	stg := newStages(h.Job)
	stg.mark("box: job received")
	if last {
		go func() { k.finish(s.runStaged(h.Job, host, stg)) }()
	} else {
		// A cells stream's next message waits for this cell's report
		// anyway: the cell runs here, without a goroutine to wake.
		k.finish(s.runStaged(h.Job, host, stg))
	}
	return k.send(sess, st, last)
}

// lockedReader lets one channel's multiplexer read at a time: the next
// channel's starts only once the last one's reader returned.
type lockedReader struct {
	mu sync.Mutex
	rr *initproto.ResetReader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rr.Read(p)
}

func (l *lockedReader) await() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rr.Await()
}

// epochWriter refuses the writes of a channel a reset replaced.
type epochWriter struct {
	mu    sync.Mutex
	w     io.Writer
	epoch int
}

type epochView struct {
	ew    *epochWriter
	epoch int
}

var errReplaced = errors.New("the channel was replaced by a newer one")

func (ew *epochWriter) next(ack []byte) (io.Writer, error) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	ew.epoch++
	if _, err := ew.w.Write(ack); err != nil {
		return nil, err
	}
	return epochView{ew, ew.epoch}, nil
}

func (v epochView) Write(p []byte) (int, error) {
	v.ew.mu.Lock()
	defer v.ew.mu.Unlock()
	if v.epoch != v.ew.epoch {
		return 0, errReplaced
	}
	return v.ew.w.Write(p)
}

type rwc struct {
	io.Reader
	io.Writer
}

func (rwc) Close() error { return nil }

// Session mode's entry, from Main.
func mainSession(arg string, stdin io.Reader, stdout io.Writer, rl *relay) int {
	spec, err := initproto.DecodeSession(arg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: bad session:", err)
		return 70
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: finding own binary:", err)
		return 70
	}
	// Bound before the interpreter starts: nothing in the box can take
	// the name first. Without it, stdin is the way in.
	var dl *direct
	if spec.Direct {
		if dl, err = listenDirect(initproto.DirectSocket); err != nil {
			fmt.Fprintln(os.Stderr, "runbox-init: no direct socket:", err)
		}
	}
	// The interpreter's import path must see the tool-call libraries
	// when it starts, as a pooled box's does (Main).
	if len(spec.CA) > 0 {
		_ = writeCABundle(initproto.CABundle, initproto.SystemCAs, spec.CA)
	}
	if onPythonPath(spec.Env, initproto.ToolsLib) {
		_ = writeLibraries(initproto.ToolsLib)
	}
	return serveSession(stdin, stdout, newSession(spec, Options{Self: self, Services: services()}), rl, dl)
}
