//go:build linux

package boxinit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

func TestCellOutSplitsAtTheMarker(t *testing.T) {
	marker := []byte("\x1erbxNONCE\x1e")
	var got bytes.Buffer
	c := &cellOut{}
	_, _ = c.Write([]byte("before any cell"))
	seen := c.begin(&got, marker, true)
	// The marker and the status arrive split across writes.
	for _, w := range []string{"out", "put\x1erb", "xNON", "CE\x1e4", "2c", "\x1elater"} {
		_, _ = c.Write([]byte(w))
	}
	select {
	case <-seen:
	default:
		t.Fatal("the marker was not seen")
	}
	c.end()
	if got.String() != "output" {
		t.Fatalf("the cell's output: %q", got.String())
	}
	if exit, check := c.status(); exit != 42 || !check {
		t.Fatalf("status %d, check failed %v", exit, check)
	}
	// A cell that never printed its marker keeps what was held back.
	got.Reset()
	c.begin(&got, marker, false)
	_, _ = c.Write([]byte("tail\x1erbx"))
	c.end()
	if got.String() != "tail\x1erbx" {
		t.Fatalf("held back output lost: %q", got.String())
	}
}

// cellTimeout is a cell's deadline in these tests: generous, as a first
// Python cell takes seconds on a loaded machine.
const cellTimeout = 60 * time.Second

func newTestSession(t testing.TB, driver, interpreter string, env ...string) (*session, func(code string, timeout time.Duration) *initproto.Report) {
	t.Helper()
	path, err := exec.LookPath(interpreter)
	if err != nil {
		t.Skipf("%s not installed: %v", interpreter, err)
	}
	dir := t.TempDir()
	file := map[string]string{"python": "main.py", "node": "main.js", "bash": "main.sh"}[driver]
	spec := initproto.Session{Driver: driver, Interpreter: path, Dir: dir, CodePath: filepath.Join(dir, file),
		Env: append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}, env...)}
	s := newSession(spec, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}})
	t.Cleanup(func() {
		if s.lost == "" {
			s.lose("test over")
		}
		s.r.stop()
	})
	run := func(code string, timeout time.Duration) *initproto.Report {
		t.Helper()
		job := &initproto.Job{Dir: dir, CodePath: spec.CodePath, Code: []byte(code), TimeoutMs: timeout.Milliseconds(),
			MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20}
		rep, _ := s.run(job, nil)
		if rep.InitError != "" {
			t.Fatalf("init error: %s", rep.InitError)
		}
		return rep
	}
	return s, run
}

func TestPythonSessionKeepsState(t *testing.T) {
	_, run := newTestSession(t, "python", "python3")
	if rep := run("import json\nx = 41\ndata = [1, 2]\n", cellTimeout); rep.ExitCode != 0 || len(rep.Stdout) != 0 || rep.Session.Lost != "" {
		t.Fatalf("first cell: %+v %q", rep, rep.Stderr)
	}
	rep := run("x += 1\nprint('x is', x)\njson.dumps(data)\n", cellTimeout)
	if rep.ExitCode != 0 || string(rep.Stdout) != "x is 42\n'[1, 2]'\n" || rep.Session.Calls != 2 {
		t.Fatalf("second cell: exit %d, stdout %q, stderr %q, calls %d", rep.ExitCode, rep.Stdout, rep.Stderr, rep.Session.Calls)
	}
	rep = run("y = 1\n\n1 / 0\n", cellTimeout)
	if rep.ExitCode != 1 || !strings.Contains(string(rep.Stderr), "line 3") || !strings.Contains(string(rep.Stderr), "ZeroDivisionError") || strings.Contains(string(rep.Stderr), "_rbx") {
		t.Fatalf("an error: exit %d, stderr %q", rep.ExitCode, rep.Stderr)
	}
	if rep := run("print(x, y)\n", cellTimeout); string(rep.Stdout) != "42 1\n" {
		t.Fatalf("after an error the state stays: %q %q", rep.Stdout, rep.Stderr)
	}
	if rep := run("def f(:\n", cellTimeout); rep.ExitCode != 1 || !strings.Contains(string(rep.Stderr), "SyntaxError") {
		t.Fatalf("a syntax error: %d %q", rep.ExitCode, rep.Stderr)
	}
}

// A cell that replaces the builtins the driver reads its requests with
// leaves the next cell to run.
func TestPythonSessionSurvivesReplacedBuiltins(t *testing.T) {
	_, run := newTestSession(t, "python", "python3")
	run("import builtins, os\nbuiltins.int = builtins.vars = builtins.open = None\nos.write = None\n", cellTimeout)
	if rep := run("print('still here')\n", cellTimeout); string(rep.Stdout) != "still here\n" || rep.Session.Lost != "" {
		t.Fatalf("the next cell: exit %d, stdout %q, stderr %q, lost %q", rep.ExitCode, rep.Stdout, rep.Stderr, rep.Session.Lost)
	}
}

// interruptOnceStarted interrupts s's running cell once the cell has
// written the file "started".
func interruptOnceStarted(s *session) {
	for range time.Tick(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(s.spec.Dir, "started")); err == nil {
			s.interruptNow()
			return
		}
	}
}

func TestPythonSessionInterruptKeepsState(t *testing.T) {
	s, run := newTestSession(t, "python", "python3")
	run("n = 7\n", cellTimeout)
	// Interrupted once it runs: before, the interrupt is dropped.
	go interruptOnceStarted(s)
	rep := run("import time\nopen('started', 'w').close()\nwhile True:\n    time.sleep(0.01)\n", cellTimeout)
	if !rep.Session.Interrupted || rep.Session.Lost != "" || !strings.Contains(string(rep.Stderr), "KeyboardInterrupt") {
		t.Fatalf("interrupted cell: %+v, stderr %q", rep.Session, rep.Stderr)
	}
	if rep := run("print(n)\n", cellTimeout); string(rep.Stdout) != "7\n" {
		t.Fatalf("after the interrupt: %q %q", rep.Stdout, rep.Stderr)
	}
}

// An interrupt that comes when no cell runs (it raced the cell's end) is
// dropped: the interpreter and its state live on.
func TestPythonSessionLateInterruptIsDropped(t *testing.T) {
	s, run := newTestSession(t, "python", "python3")
	run("n = 7\n", cellTimeout)
	s.signalInterrupt()
	time.Sleep(200 * time.Millisecond)
	if rep := run("print(n)\n", cellTimeout); string(rep.Stdout) != "7\n" || rep.Session.Lost != "" {
		t.Fatalf("after a late interrupt: %q %q %+v", rep.Stdout, rep.Stderr, rep.Session)
	}
}

func TestSessionTimeoutLosesTheSession(t *testing.T) {
	_, run := newTestSession(t, "python", "python3")
	run("n = 7\n", cellTimeout)
	rep := run("import time\ntime.sleep(30)\n", 300*time.Millisecond)
	if !rep.TimedOut || !strings.Contains(rep.Session.Lost, "timeout") {
		t.Fatalf("timed out cell: %+v", rep.Session)
	}
	if rep := run("print(n)\n", cellTimeout); rep.Session.Lost == "" || rep.Session.Calls != 3 {
		t.Fatalf("the next call: %+v", rep.Session)
	}
}

func TestNodeSessionKeepsDeclarationsAndAwaits(t *testing.T) {
	_, run := newTestSession(t, "node", "node")
	if rep := run("const a = 20\nlet b = await Promise.resolve(22)\nglobalThis.c = 1\n", cellTimeout); rep.ExitCode != 0 {
		t.Fatalf("first cell: %d %q", rep.ExitCode, rep.Stderr)
	}
	rep := run("console.log(a + b + c)\n", cellTimeout)
	if rep.ExitCode != 0 || string(rep.Stdout) != "43\n" {
		t.Fatalf("second cell: %d %q %q", rep.ExitCode, rep.Stdout, rep.Stderr)
	}
	rep = run("\nnull.x\n", cellTimeout)
	if rep.ExitCode != 1 || !strings.Contains(string(rep.Stderr), "TypeError") || !strings.Contains(string(rep.Stderr), "main.js:2") {
		t.Fatalf("an error: %d %q", rep.ExitCode, rep.Stderr)
	}
	// A server a cell unref()s outlives the cell, as it would not keep
	// `node main.js` from exiting: the next cell reaches it.
	if rep := run("globalThis.srv = require('http').createServer((q, r) => r.end('hi')).listen(0, '127.0.0.1')\nsrv.unref()\n", cellTimeout); rep.ExitCode != 0 {
		t.Fatalf("a cell that starts a server: %d %q", rep.ExitCode, rep.Stderr)
	}
	rep = run("const r = await fetch('http://127.0.0.1:' + srv.address().port)\nconsole.log(await r.text())\n", cellTimeout)
	if rep.ExitCode != 0 || string(rep.Stdout) != "hi\n" {
		t.Fatalf("the next cell: %d %q %q", rep.ExitCode, rep.Stdout, rep.Stderr)
	}
}

// A Node cell ends where `node main.js` would exit: process.exit and an
// uncaught error end the cell, not the session, and stop what it left
// running (a timer that would keep the next cell from ending); the
// declarations stay.
func TestNodeSessionCellEndsAsTheProcessWould(t *testing.T) {
	s, run := newTestSession(t, "node", "node")
	run("const kept = 42\n", cellTimeout)
	if rep := run("setInterval(() => console.log('tick'), 10)\nsetTimeout(() => { throw new Error('late') }, 100)\n", cellTimeout); rep.ExitCode != 1 || !strings.Contains(string(rep.Stderr), "Error: late") {
		t.Fatalf("a late error: %d %q", rep.ExitCode, rep.Stderr)
	}
	if rep := run("console.log(kept)\n", cellTimeout); rep.ExitCode != 0 || string(rep.Stdout) != "42\n" || rep.Session.Lost != "" {
		t.Fatalf("after the error, the interval is gone and the state stays: %d %.100q %.100q %+v", rep.ExitCode, rep.Stdout, rep.Stderr, rep.Session)
	}
	if rep := run("process.exit(7)\n", cellTimeout); rep.ExitCode != 7 || rep.Session.Lost != "" {
		t.Fatalf("process.exit: %d %+v", rep.ExitCode, rep.Session)
	}
	// An interrupt ends a cell waiting on the event loop.
	go interruptOnceStarted(s)
	rep := run("require('fs').writeFileSync('started', '')\nsetInterval(() => {}, 1000)\n", cellTimeout)
	if rep.ExitCode != 130 || !rep.Session.Interrupted || rep.Session.Lost != "" {
		t.Fatalf("an interrupted cell: %d %+v %q", rep.ExitCode, rep.Session, rep.Stderr)
	}
	if rep := run("console.log(kept + 1)\n", cellTimeout); string(rep.Stdout) != "43\n" {
		t.Fatalf("after the interrupt: %q %q", rep.Stdout, rep.Stderr)
	}
}

// A cell that ends at the first of many queued errors leaves the rest to
// fire after it (a spawn loop at the pids limit queues one per failed
// child): they have no cell to end and are dropped, and a flood of them
// neither fills the next cell's stderr nor, by a full pipe, throws in the
// driver's handler, which ended the interpreter (status 7).
func TestNodeSessionDropsErrorsBetweenCells(t *testing.T) {
	_, run := newTestSession(t, "node", "node")
	flood := "for (let i = 0; i < 3000; i++) process.nextTick(() => { throw new Error('queued ' + 'x'.repeat(2000)) })\n"
	if rep := run(flood, cellTimeout); rep.ExitCode != 1 || !strings.Contains(string(rep.Stderr), "Error: queued") || rep.Session.Lost != "" {
		t.Fatalf("the flooding cell: %d %.200q %+v", rep.ExitCode, rep.Stderr, rep.Session)
	}
	if rep := run("console.log('next')\n", cellTimeout); rep.ExitCode != 0 || string(rep.Stdout) != "next\n" || len(rep.Stderr) != 0 || rep.Session.Lost != "" {
		t.Fatalf("the next cell: %d %.100q %.200q %+v", rep.ExitCode, rep.Stdout, rep.Stderr, rep.Session)
	}
}

func TestBashSessionKeepsVariablesFunctionsAndDir(t *testing.T) {
	_, run := newTestSession(t, "bash", "bash")
	run("X=5\ngreet() { echo \"hi $1\"; }\nmkdir -p sub && cd sub\n", cellTimeout)
	rep := run("greet $X\nbasename \"$PWD\"\n", cellTimeout)
	if rep.ExitCode != 0 || string(rep.Stdout) != "hi 5\nsub\n" {
		t.Fatalf("second cell: %d %q %q", rep.ExitCode, rep.Stdout, rep.Stderr)
	}
	if rep := run("if then\n", cellTimeout); !rep.CheckFailed {
		t.Fatalf("a syntax error: %+v %q", rep, rep.Stderr)
	}
	if rep := run("false\n", cellTimeout); rep.ExitCode != 1 {
		t.Fatalf("status: %d", rep.ExitCode)
	}
}

// A bash cell's syntax check answers as `bash -n` of the cell's file: a
// cell that does not parse runs not a line and gets bash's own message and
// status, one with a NUL byte too, and one that parses runs with no word
// of the check's (a here-document's warning is the cell's, once); a parser
// option an earlier cell set counts no more than it does for `bash -n`.
func TestBashSessionSyntaxCheckAsBashN(t *testing.T) {
	codes := []string{"echo ran\nif true; then\n", "echo ran\nfi\n", "echo ran; x=$(\n", "echo ran\x00", "shopt -s extglob", "echo ran @(a|b)\n"}
	// bash -n's answers, before the session's reaper takes every child.
	type answer struct {
		msg    string
		status int
	}
	bashN := map[string]answer{}
	path := filepath.Join(t.TempDir(), "main.sh")
	for _, code := range codes {
		if err := os.WriteFile(path, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", "-n", path).CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			bashN[code] = answer{string(out), exit.ExitCode()}
		} else if err != nil {
			t.Skipf("bash -n: %v", err)
		}
	}
	s, run := newTestSession(t, "bash", "bash")
	for _, code := range codes {
		rep := run(code, cellTimeout)
		want, fails := bashN[code]
		if !fails {
			continue
		}
		want.msg = strings.ReplaceAll(want.msg, path, s.spec.CodePath)
		if !rep.CheckFailed || rep.ExitCode != want.status || len(rep.Stdout) != 0 || string(rep.Stderr) != want.msg {
			t.Errorf("%q: check failed %v, exit %d, stdout %q, stderr %q; bash -n: %d %q", code, rep.CheckFailed, rep.ExitCode, rep.Stdout, rep.Stderr, want.status, want.msg)
		}
	}
	// An IFS of the session's is not the check's.
	if rep := run("IFS=')'", cellTimeout); rep.ExitCode != 0 {
		t.Fatalf("IFS=')': %+v %q", rep, rep.Stderr)
	}
	if rep := run("echo ran )", cellTimeout); !rep.CheckFailed || len(rep.Stdout) != 0 {
		t.Fatalf("a syntax error under IFS=')': %+v %q %q", rep, rep.Stdout, rep.Stderr)
	}
	if rep := run("", cellTimeout); rep.CheckFailed || rep.ExitCode != 0 {
		t.Fatalf("an empty cell: %+v %q", rep, rep.Stderr)
	}
	rep := run("cat <<EOF\nabc", cellTimeout)
	want := s.spec.CodePath + ": line 2: warning: here-document at line 1 delimited by end-of-file (wanted `EOF')\n"
	if rep.CheckFailed || rep.ExitCode != 0 || string(rep.Stdout) != "abc\n" || string(rep.Stderr) != want {
		t.Fatalf("a cell that parses: %+v %q %q", rep, rep.Stdout, rep.Stderr)
	}
}

// A restarted server opens the channel again over the same stdin and
// stdout, after the old one broke mid-frame: the box answers the reset
// and serves the new channel with its state intact, and each cell's box
// services reach the server over the channel its job came on.
func TestSessionServesANewChannelAfterAReset(t *testing.T) {
	s, _ := newTestSession(t, "bash", "bash")
	probe := &probeService{}
	s.opts.Services = []Service{probe}
	inR, inW := io.Pipe()
	// Like an engine's attach: a new attach sees the box's output from
	// then on, the old one ends.
	att := &attachments{}
	go serveSession(inR, att, s, nil, nil)

	connect := func(nonce byte) *yamux.Session {
		t.Helper()
		out := att.attach()
		sess := openChannel(t, initproto.NewResetWriter(inW), out, out, nonce, false)
		// The server's side of the cell's services: it names the channel.
		go func() {
			for {
				st, err := sess.AcceptStream()
				if err != nil {
					return
				}
				var h initproto.Header
				if _, err := initproto.Receive(st, &h, 1<<20); err == nil && h.Kind == "probe" {
					_, _ = fmt.Fprintf(st, "channel %d", nonce)
				}
				_ = st.Close()
			}
		}()
		return sess
	}
	call := func(sess *yamux.Session, code string) *initproto.Report {
		t.Helper()
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		job := &initproto.Job{Dir: s.spec.Dir, CodePath: s.spec.CodePath, Code: []byte(code), TimeoutMs: 5000, MaxOutputBytes: 1 << 16}
		go func() { _ = initproto.SendJob(st, job) }()
		rep, err := initproto.ReceiveReport(st, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := connect(1)
	if rep := call(first, "X=kept\n"); rep.ExitCode != 0 {
		t.Fatalf("first call: %+v", rep)
	}
	if got := probe.seen(); got != "channel 1,stop" {
		t.Fatalf("the first cell's service: %s", got)
	}
	// The old server dies half-way through a frame.
	_, _ = inW.Write([]byte{0xA5, 0x10, 0x00, 'p', 'a', 'r', 't'})
	second := connect(2)
	rep := call(second, "echo $X\n")
	if string(rep.Stdout) != "kept\n" || rep.Session.Calls != 2 {
		t.Fatalf("after the reset: %q, %+v", rep.Stdout, rep.Session)
	}
	if got := probe.seen(); got != "channel 1,stop,channel 2,stop" {
		t.Fatalf("the services after the reset: %s", got)
	}
	_ = first.Close()
	_ = second.Close()
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, att.attach()) }()
}

type attachments struct {
	mu sync.Mutex
	w  *io.PipeWriter
}

func (a *attachments) attach() *io.PipeReader {
	r, w := io.Pipe()
	a.mu.Lock()
	if a.w != nil {
		_ = a.w.Close()
	}
	a.w = w
	a.mu.Unlock()
	return r
}

func (a *attachments) Write(p []byte) (int, error) {
	a.mu.Lock()
	w := a.w
	a.mu.Unlock()
	if w == nil {
		return len(p), nil
	}
	_, _ = w.Write(p)
	return len(p), nil
}

// probeService is a box service that, as each cell starts, asks the server
// over the cell's host which channel it is on, and notes its own stop.
type probeService struct {
	mu  sync.Mutex
	log []string
}

func (p *probeService) Start(ctx context.Context, host *Host, job *initproto.Job) (func(), error) {
	got := "no host"
	if hs, err := host.Open(ctx, "probe", nil); err == nil {
		_ = hs.CloseWrite()
		b, _ := io.ReadAll(hs)
		_ = hs.Close()
		got = string(b)
	}
	p.note(got)
	return func() { p.note("stop") }, nil
}

func (p *probeService) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, s)
}

func (p *probeService) seen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, ",")
}

// A cell's stdin reaches it whole (NUL bytes, backslashes, more than a
// pipe holds) through the interpreter's request pipe, never through a file
// in the box's writable space; a cell that leaves its stdin unread leaves
// nothing behind for the next one.
func TestSessionStdinTakesNoFile(t *testing.T) {
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	copy(data, "\\x41\\c%s\\\n\x00")
	want := fmt.Sprintf("%x\n", sha256.Sum256(data))
	for _, tc := range []struct{ driver, interpreter, read, skip string }{
		{"python", "python3", "import hashlib, sys\nprint(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n", "pass\n"},
		{"bash", "bash", "sha256sum | cut -d' ' -f1\n", "true\n"},
		{"node", "node", "{\n  const h = require('crypto').createHash('sha256')\n  process.stdin.on('data', c => h.update(c)).on('end', () => console.log(h.digest('hex')))\n}\n", "0\n"},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			s, _ := newTestSession(t, tc.driver, tc.interpreter)
			tmpBefore, _ := filepath.Glob("/tmp/.runbox-stdin-*")
			call := func(code string, stdin []byte) *initproto.Report {
				job := &initproto.Job{Dir: s.spec.Dir, CodePath: s.spec.CodePath, Code: []byte(code), Stdin: stdin,
					TimeoutMs: cellTimeout.Milliseconds(), MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20}
				rep, _ := s.run(job, nil)
				if rep.InitError != "" || rep.Session.Lost != "" {
					t.Fatalf("init error %q, lost %q", rep.InitError, rep.Session.Lost)
				}
				return rep
			}
			if rep := call(tc.skip, data); rep.ExitCode != 0 {
				t.Fatalf("a cell that reads no stdin: %d %q", rep.ExitCode, rep.Stderr)
			}
			if rep := call(tc.read, data); string(rep.Stdout) != want {
				t.Fatalf("stdin's hash %q, want %q (stderr %q)", rep.Stdout, want, rep.Stderr)
			}
			if rep := call(tc.read, nil); string(rep.Stdout) != fmt.Sprintf("%x\n", sha256.Sum256(nil)) {
				t.Fatalf("empty stdin's hash %q (stderr %q)", rep.Stdout, rep.Stderr)
			}
			if after, _ := filepath.Glob("/tmp/.runbox-stdin-*"); len(after) > len(tmpBefore) {
				t.Fatalf("stdin went to files: %v", after)
			}
		})
	}
}

// Each Python cell reads its own stdin from a sys.stdin as a fresh
// interpreter's would be, whatever the cell before did with its own: read
// it, closed it, replaced it, reconfigured it, kept it.
func TestPythonSessionStdinEachCell(t *testing.T) {
	s, _ := newTestSession(t, "python", "python3")
	call := func(code string, stdin string) string {
		t.Helper()
		job := &initproto.Job{Dir: s.spec.Dir, CodePath: s.spec.CodePath, Code: []byte(code), Stdin: []byte(stdin),
			TimeoutMs: cellTimeout.Milliseconds(), MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20}
		rep, _ := s.run(job, nil)
		if rep.InitError != "" || rep.Session.Lost != "" || rep.ExitCode != 0 {
			t.Fatalf("%q: init error %q, lost %q, exit %d, stderr %q", code, rep.InitError, rep.Session.Lost, rep.ExitCode, rep.Stderr)
		}
		return string(rep.Stdout)
	}
	const show = "import sys\nprint(repr(sys.stdin.read()), sys.stdin.encoding, sys.stdin.errors, sys.stdin.line_buffering, sorted(vars(sys.stdin)))\n"
	fresh := call(show, "")
	if !strings.HasPrefix(fresh, "'' ") {
		t.Fatalf("an empty stdin: %q", fresh)
	}
	for _, tc := range []struct{ name, code, stdin string }{
		{"read", "import sys\nsys.stdin.read()\n", ""},
		{"closed", "import sys\nsys.stdin.close()\n", ""},
		{"replaced", "import io, sys\nsys.stdin = io.StringIO('not yours')\n", ""},
		{"reconfigured", "import sys\nsys.stdin.reconfigure(encoding='latin-1', errors='replace')\n", ""},
		{"given an attribute", "import sys\nsys.stdin.mine = 1\n", ""},
		{"with data", "import sys\nprint(sys.stdin.read())\n", "data"},
		{"kept", "import sys\nkept = sys.stdin\n", ""},
	} {
		call(tc.code, tc.stdin)
		if got := call(show, ""); got != fresh {
			t.Errorf("after a cell whose stdin was %s: %q, want %q", tc.name, got, fresh)
		}
		if got := call("import sys\nprint(sys.stdin.read())\n", "next"); got != "next\n" {
			t.Errorf("after a cell whose stdin was %s, a cell's own stdin: %q", tc.name, got)
		}
	}
}

// TestSessionCellOutlivesItsChannel: a cell whose channel a restarted
// server's reset replaced runs to its end; the new channel collects its
// report by run id, and the next cell finds the state it left.
func TestSessionCellOutlivesItsChannel(t *testing.T) {
	s, _ := newTestSession(t, "bash", "bash")
	inR, inW := io.Pipe()
	att := &attachments{}
	go serveSession(inR, att, s, nil, nil)
	t.Cleanup(func() { _ = inW.Close() })
	b := &oneOffBox{t: t, inW: inW, w: initproto.NewResetWriter(inW), att: att}
	job := func(code, id string) *initproto.Job {
		return &initproto.Job{Dir: s.spec.Dir, CodePath: s.spec.CodePath, Code: []byte(code), TimeoutMs: 60000,
			MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20, RunID: id}
	}
	first := b.connect(1, false)
	st, err := first.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := initproto.SendJob(st, job("touch started; sleep 1; X=kept; echo cell; printf art > a.txt", "r_cell")); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(s.spec.Dir, "started"))
	second := b.connect(2, false)
	rep, arts, err := collectRun(t, second, initproto.Header{Kind: initproto.StreamCollect, Run: "r_cell"}, nil)
	if err != nil || string(rep.Stdout) != "cell\n" || rep.Session == nil || rep.Session.Calls != 1 || len(arts) != 2 || arts[0] != "art" {
		t.Fatalf("collected %+v %q %v", rep, arts, err)
	}
	if _, _, err := collectRun(t, second, initproto.Header{Kind: initproto.StreamCollect, Run: "r_none"}, nil); err == nil {
		t.Fatal("an unknown run's collect was answered")
	}
	rep, _, err = collectRun(t, second, initproto.Header{}, job("echo $X", "r_next"))
	if err != nil || string(rep.Stdout) != "kept\n" || rep.Session.Calls != 2 {
		t.Fatalf("the next cell: %+v %v", rep, err)
	}
	_ = second.Close()
	go func() { _, _ = io.Copy(io.Discard, att.attach()) }()
}

// waitForFile waits until the code under test made path: the job reached
// the box before its server dies.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s was not made", path)
}

// A cells stream carries cell after cell, each answered on it by its
// report (a malformed one too) with its artifacts on streams of their own;
// a cell whose channel a reset replaced runs to its end and is collected
// on the next channel, whose own cells stream carries on with the state.
func TestSessionCellsStream(t *testing.T) {
	s, _ := newTestSession(t, "bash", "bash")
	inR, inW := io.Pipe()
	att := &attachments{}
	go serveSession(inR, att, s, nil, nil)
	t.Cleanup(func() { _ = inW.Close() })
	b := &oneOffBox{t: t, inW: inW, w: initproto.NewResetWriter(inW), att: att}
	job := func(code, id string) *initproto.Job {
		return &initproto.Job{Dir: s.spec.Dir, CodePath: s.spec.CodePath, Code: []byte(code), TimeoutMs: 60000,
			MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20, RunID: id}
	}
	cells := func(sess *yamux.Session) (*yamux.Stream, *bufio.Reader) {
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		return st, bufio.NewReaderSize(st, 64<<10)
	}
	first := b.connect(1, false)
	st, br := cells(first)
	for i := 1; i <= 20; i++ {
		code := "X=$((X+1)); echo $X"
		if i == 20 {
			code += "; printf art > a.txt"
		}
		if err := initproto.SendCell(st, job(code, fmt.Sprint("r_", i))); err != nil {
			t.Fatal(err)
		}
		rep, err := initproto.ReceiveReport(br, 1<<20)
		if err != nil || string(rep.Stdout) != fmt.Sprintf("%d\n", i) || rep.Session == nil || rep.Session.Calls != i {
			t.Fatalf("cell %d: %+v %v", i, rep, err)
		}
		if i == 20 {
			as, err := first.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			var ah initproto.Header
			blobs, err := initproto.Receive(as, &ah, 1<<20)
			if err != nil || ah.Kind != initproto.StreamArtifact || len(blobs) != 1 || string(blobs[0]) != "art" || len(rep.Artifacts) != 1 {
				t.Fatalf("the artifact: %+v %q %v (%+v)", ah, blobs, err, rep.Artifacts)
			}
		}
	}
	if err := initproto.Send(st, initproto.Header{Kind: initproto.StreamCells}); err != nil {
		t.Fatal(err)
	}
	if rep, err := initproto.ReceiveReport(br, 1<<20); err != nil || rep.InitError == "" {
		t.Fatalf("a malformed cell: %+v %v", rep, err)
	}
	if err := initproto.SendCell(st, job("touch started; sleep 1; echo late", "r_late")); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(s.spec.Dir, "started"))
	second := b.connect(2, false)
	rep, _, err := collectRun(t, second, initproto.Header{Kind: initproto.StreamCollect, Run: "r_late"}, nil)
	if err != nil || string(rep.Stdout) != "late\n" || rep.Session.Calls != 21 {
		t.Fatalf("collected %+v %v", rep, err)
	}
	st, br = cells(second)
	if err := initproto.SendCell(st, job("echo $X", "r_next")); err != nil {
		t.Fatal(err)
	}
	if rep, err := initproto.ReceiveReport(br, 1<<20); err != nil || string(rep.Stdout) != "20\n" || rep.Session.Calls != 22 {
		t.Fatalf("the next channel's cell: %+v %v", rep, err)
	}
	_ = second.Close()
	go func() { _, _ = io.Copy(io.Discard, att.attach()) }()
}

// TestWriteNow writes what a pipe takes without waiting, and says a
// reader that is gone.
func TestWriteNow(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n, err := writeNow(w, []byte("small")); n != 5 || err != nil {
		t.Fatalf("a small write: %d, %v", n, err)
	}
	big := make([]byte, 4<<20) // more than a pipe holds
	n, err := writeNow(w, big)
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("a write larger than the pipe: %d of %d, %v; want a short count", n, len(big), err)
	}
	if n, err := writeNow(w, []byte("x")); n != 0 || err != nil {
		t.Fatalf("a full pipe: %d, %v; want 0, nil", n, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(r, got); err != nil || string(got) != "small" {
		t.Fatalf("read back %q, %v", got, err)
	}
	_ = r.Close()
	if _, err := writeNow(w, []byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("a pipe without a reader: %v; want EPIPE", err)
	}
}
