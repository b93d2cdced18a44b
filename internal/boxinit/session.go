//go:build linux

package boxinit

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/procstat"
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
		return []string{s.Interpreter, "-c", pythonDriver}, nil
	case "node":
		// --expose-internals: the REPL's own rewrite of top-level await.
		return []string{s.Interpreter, "--expose-internals", "-e", nodeDriver}, nil
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
	r    *reaper
	p    *process
	out  *cellOut
	errs *cellOut

	mu        sync.Mutex // one cell at a time
	calls     int
	lost      string
	interrupt chan struct{}
}

// newSession starts the interpreter; a failure to start is the session's
// loss, said on its first call.
func newSession(spec initproto.Session, opts Options) *session {
	s := &session{spec: spec, opts: opts, r: newReaper(), out: &cellOut{}, errs: &cellOut{}, interrupt: make(chan struct{}, 1)}
	if s.opts.CgroupRoot == "" {
		s.opts.CgroupRoot = "/sys/fs/cgroup"
	}
	if s.opts.Scratch == nil {
		s.opts.Scratch = []string{spec.Dir, "/tmp"}
	}
	argv, err := driverArgv(spec)
	if err == nil {
		s.p, err = start(s.r, s.opts.Self, argv, spec.Env, spec.Dir, spec.CPUSeconds, spec.NProc, true)
	}
	if err != nil {
		s.lost = "the interpreter could not be started: " + err.Error()
		return s
	}
	s.p.stdout.open(s.out)
	s.p.stderr.open(s.errs)
	return s
}

// run runs one job as a cell of the interpreter; host is the channel the
// job came on, the way of the cell's box services to the server.
func (s *session) run(job *initproto.Job, host *Host) (*initproto.Report, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	rep := &initproto.Report{OOMKills: -1, Session: &initproto.SessionState{Calls: s.calls}}
	if s.lost != "" {
		rep.Session.Lost = s.lost
		rep.Stdout, rep.Stderr = []byte{}, []byte{}
		return rep, nil
	}
	if s.p.startError() != "" || !s.p.alive(s.r) {
		s.readers()
		rep.StartError = s.p.startError()
		s.lose("the interpreter ended before its first call")
		rep.Session.Lost = s.lost
		return rep, nil
	}
	_, err := unpackSession(job)
	if err != nil {
		if full := noSpace(job, err); full != nil {
			full.Session = rep.Session
			return full, nil
		}
		return &initproto.Report{InitError: err.Error(), Session: rep.Session}, nil
	}
	// The box services run for the cell, as for a one-off job, over the
	// channel this job came on (a reset since the last cell replaced it);
	// stopped when the cell has ended, before the report goes out. A
	// process the cell leaves behind finds them gone until the next cell.
	opts := s.opts
	opts.Host = host.ForCall(job.Call)
	stopServices, err := startServices(context.Background(), opts, job)
	if err != nil {
		return &initproto.Report{InitError: err.Error(), Session: rep.Session}, nil
	}
	defer stopServices()
	before := snapshot(job.Dir)

	cg := cgroupFiles(s.opts.CgroupRoot)
	oomBefore, pidsBefore := cg.oomKills(), cg.pidsMaxEvents()
	cpuBefore := treeCPUMs(s.p.pid)
	var usageBefore syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &usageBefore)

	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	marker := "\x1erbx" + hex.EncodeToString(nonce[:]) + "\x1e"
	stdout, stderr := newCapture(job.MaxOutputBytes), newCapture(job.MaxOutputBytes)
	outSeen := s.out.begin(stdout, []byte(marker), false)
	errSeen := s.errs.begin(stderr, []byte(marker), true)
	select {
	case <-s.interrupt: // meant for a cell that has ended
	default:
	}

	// The cell's request and its stdin go on the interpreter's descriptor
	// 4, a pipe: nothing of a cell is written to the box's writable space,
	// which the program may have filled. Written aside, as a cell may not
	// read it and a large stdin fills the pipe.
	begun := time.Now()
	ctlDone := make(chan error, 1)
	go func() {
		_, err := s.p.ctl.Write(cellRequest(s.spec.Driver, job, marker))
		ctlDone <- err
	}()
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
			rep.TimedOut = true
			s.lose(fmt.Sprintf("the call ran past its %s timeout and the interpreter was killed", time.Duration(job.TimeoutMs)*time.Millisecond))
		case <-s.interrupt:
			rep.Session.Interrupted = true
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
	ended := time.Now()
	if finished {
		select {
		case <-outSeen:
		case <-time.After(markerWait):
		}
		status, checkFailed := s.errs.status()
		rep.ExitCode = status
		rep.CheckFailed = checkFailed
	} else if s.r.mainStatus.Signaled() {
		rep.Signal = int(s.r.mainStatus.Signal())
		rep.ExitCode = 128 + rep.Signal
	} else if s.r.mainStatus.Exited() {
		rep.ExitCode = s.r.mainStatus.ExitStatus()
	}
	s.out.end()
	s.errs.end()
	rep.WallMs = ended.Sub(begun).Milliseconds()
	rep.EndedUnixMs = ended.UnixMilli()
	rep.Stdout, rep.StdoutTruncated, rep.StdoutBytes = stdout.bytes()
	rep.Stderr, rep.StderrTruncated, rep.StderrBytes = stderr.bytes()
	if s.lost == "" {
		rep.CPUMs = max(0, treeCPUMs(s.p.pid)-cpuBefore)
	} else {
		var usage syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &usage)
		rep.CPUMs = max(0, rusageMs(&usage)-rusageMs(&usageBefore))
	}
	rep.PeakMemoryBytes = cg.peakMemory()
	if after := cg.oomKills(); after >= 0 && oomBefore >= 0 {
		rep.OOMKills = after - oomBefore
	}
	if rep.OOMKills > 0 && s.lost != "" && !rep.TimedOut {
		s.lost = "the interpreter ran out of memory and was killed"
	}
	rep.PidsLimitHit = cg.pidsMaxEvents() > pidsBefore
	rep.DiskFull = fullMount(s.opts.Scratch)
	rep.Session.Lost = s.lost
	if rep.Session.Lost != "" {
		rep.Session.Interrupted = false
	}
	return rep, collectChanged(job, before, rep)
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

// treeCPUMs is a process's CPU time with that of its waited-for children.
func treeCPUMs(pid int) int64 {
	var total int64
	for _, f := range []int{14, 15, 16, 17} {
		n, _ := strconv.ParseInt(procstat.Field(pid, f), 10, 64)
		total += n
	}
	return total * 1000 / 100 // USER_HZ is 100 on Linux
}

func rusageMs(u *syscall.Rusage) int64 {
	return (u.Utime.Sec+u.Stime.Sec)*1000 + (u.Utime.Usec+u.Stime.Usec)/1000
}

// cellRequest is what a session's driver reads on descriptor 4 for one
// cell: a line naming the code and the marker, and the cell's stdin after
// it. The Python driver reads a JSON line and that many raw bytes; the bash
// driver reads "length marker path" and that many characters of printf %b
// text (bash variables hold no NUL bytes); the Node driver gets no stdin.
func cellRequest(driver string, job *initproto.Job, marker string) []byte {
	switch driver {
	case "bash":
		in := printfEscape(job.Stdin)
		return []byte(fmt.Sprintf("%d %s %s\n%s", len(in), marker, job.CodePath, in))
	case "python":
		b, _ := json.Marshal(map[string]any{"path": job.CodePath, "stdin": len(job.Stdin), "marker": marker})
		return append(append(b, '\n'), job.Stdin...)
	}
	b, _ := json.Marshal(map[string]any{"path": job.CodePath, "stdin": 0, "marker": marker})
	return append(b, '\n')
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

// unpackSession writes the input files and the code into the workspace,
// replacing what earlier calls left (never through a link), and returns
// their hashes.
func unpackSession(job *initproto.Job) (map[string]string, error) {
	return unpackWith(job, os.O_TRUNC)
}

// serveSession is a session box's side of the channel: it waits for a
// reset, answers it, and serves that channel's jobs one at a time until
// the next reset (a restarted server) or the end of stdin.
func serveSession(in io.Reader, out io.Writer, s *session) int {
	rr := &lockedReader{rr: initproto.NewResetReader(in)}
	ew := &epochWriter{w: out}
	for {
		nonce, err := rr.await()
		if err != nil {
			// stdin ended: nobody can reach this box again.
			return 0
		}
		w, err := ew.next(initproto.Ack(nonce))
		if err != nil {
			continue
		}
		sess, err := yamux.Server(initproto.Coalesce(rwc{rr, w}), initproto.MuxConfig())
		if err != nil {
			continue
		}
		host := NewHost(sess)
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				break
			}
			go serveSessionStream(sess, host, st, s)
		}
		_ = sess.Close()
	}
}

func serveSessionStream(sess *yamux.Session, host *Host, st *yamux.Stream, s *session) {
	defer st.Close()
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, maxJobBytes)
	if err != nil {
		return
	}
	switch h.Kind {
	case initproto.StreamInterrupt:
		s.interruptNow()
	case initproto.StreamJob:
		var rep *initproto.Report
		var contents [][]byte
		if h.Job == nil || initproto.JobBlobs(h.Job, blobs) != nil {
			rep = &initproto.Report{InitError: "a malformed job"}
		} else {
			rep, contents = s.run(h.Job, host)
		}
		if initproto.SendReport(st, rep) != nil {
			return
		}
		_ = st.Close()
		for i, c := range contents {
			if sendArtifact(sess, i, c) != nil {
				return
			}
		}
	}
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
func mainSession(arg string, stdin io.Reader, stdout io.Writer) int {
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
	// The interpreter's import path must see the tool-call libraries
	// when it starts, as a pooled box's does (Main).
	if len(spec.CA) > 0 {
		_ = writeCABundle(initproto.CABundle, initproto.SystemCAs, spec.CA)
	}
	if slices.Contains(spec.Env, "PYTHONPATH="+initproto.ToolsLib) {
		_ = writeLibraries(initproto.ToolsLib)
	}
	return serveSession(stdin, stdout, newSession(spec, Options{Self: self, Services: services()}))
}
