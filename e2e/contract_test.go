//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/sandbox"
)

// The run_code contract, as one table run against every backend: each
// case is a program and the outcome the contract promises for it. Where a
// backend truly differs, the case says so in on, with the reason; no case
// is skipped on any backend.
//
// Each case runs both ways: as a one-off run, and as a cell of a session
// (contract_cells_test.go), and both must answer the same in everything an
// agent acts on. A session differs by design only in the state it keeps,
// the value of a Python cell's last expression it shows, and the session
// in its result (docs/design.md); a timeout or running out of memory loses
// the session's state. Where a case differs for one of those, it says so
// in inSession.

// contractCase is one program and what it must answer.
type contractCase struct {
	name, lang, code string
	// args are further run_code arguments (stdin, timeout_seconds, files).
	args map[string]any
	want outcome
	// on replaces want on the backends it names; each entry says why.
	on map[string]outcome
	// inSession, when set, is what the program answers as a session's
	// cell instead, by a difference of a session's own (its why); the two
	// ways are then not compared.
	inSession *sessionWay
	// exits: the program ends its interpreter (bash's exit,
	// process.exit), and with it the session's state.
	exits bool
	// alone: the program leaves in its session what no reset undoes and
	// a later cell would meet (processes, open files): its session is
	// closed after it.
	alone bool
	// varies: the program's output differs from run to run, so the two
	// ways' stdout are not compared.
	varies bool
}

// sessionWay is a case's answer as a session's cell, where it differs.
type sessionWay struct {
	why  string
	want outcome
}

// outcome is what a result must be.
type outcome struct {
	kind  contract.Kind // "" for a run that succeeds
	limit contract.Limit
	// stdout is the exact output, when not empty.
	stdout string
	// syscall is the call a forbidden_syscall result may name; "" lets it
	// name none. Kills that share a moment can be rate-limited out of the
	// kernel log, so a blank name always passes (TestForbiddenSyscallNamed
	// checks the names one kill at a time, on Docker).
	syscall string
	// check holds further assertions.
	check func(t *testing.T, r contract.Result, res *mcp.CallToolResult)
	// or is the error a backend may give instead, when which limit bites
	// first is a race the backend decides (docs/security.md says why).
	or *outcome
}

// contractConcurrency is the servers' concurrency in TestContract, and so
// how many cases run at once on a backend.
const contractConcurrency = 4

// backend is a platform TestContract runs the table on.
type backend struct {
	name string
	// isolation is what results from it name.
	isolation string
	// start starts a server on it for the whole table; it skips the test
	// (fails under CI) when the backend is not on this machine, and at the
	// end closes the server and checks that no box of it remains.
	start func(t *testing.T, manifest string) *server
}

func backends() []backend {
	return []backend{
		{"docker", "runc", dockerServer},
		{"gvisor", "gvisor", gvisorServer},
		{"podman", "runc", podmanServer},
		{"oci", "runc", ociServer},
		{"kubernetes", "runc", func(t *testing.T, manifest string) *server {
			// Requests equal limits and the test node has 2 CPUs to give:
			// four one-off pods and the four session pods beside them
			// (cells) of 0.5 CPU would leave pods Pending.
			return kubeServer(t, strings.Replace(manifest, "limits:\n", "limits:\n  cpus: 0.25\n", 1))
		}},
	}
}

// contractManifest is the servers' manifest in TestContract: a session per
// slot and language may be open at once.
// Every call answers with its result however long it runs (a loaded gVisor
// takes most of a minute over oom/bash): answer_within_seconds 0.
var contractManifest = "concurrency: " + strconv.Itoa(contractConcurrency) + "\nsessions:\n  max_open: 16\n  max_per_client: 16\nlimits:\n  answer_within_seconds: 0\n"

// TestContract runs every contract case on every backend, one server per
// backend; each case as a one-off run and as a session's cell, the runs in
// parallel up to the server's concurrency.
//
// It stays serial: its timeout cases want a program's first output
// within a 5 s deadline, which node missed on a loaded 2-core machine
// with parallel tests beside the table.
func TestContract(t *testing.T) {
	cases := contractCases()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, contractManifest)
			sessions := newCells(s, contractConcurrency)
			t0 := time.Now()
			slots := make(chan struct{}, contractConcurrency)
			var wg sync.WaitGroup
			for _, c := range cases {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t.Run(c.name, func(t *testing.T) { c.run(t, s, b, sessions, slots) })
				}()
			}
			wg.Wait()
			sessions.closeAll(t)
			t.Logf("the table on %s took %s", b.name, time.Since(t0).Round(time.Millisecond))
		})
	}
}

// run runs c both ways at once, each when it gets one of slots: as a
// one-off run and as a cell of a session; then it compares the two
// answers.
func (c contractCase) run(t *testing.T, s *server, b backend, sessions *cells, slots chan struct{}) {
	want := c.want
	if o, ok := c.on[b.name]; ok {
		want = o
	}
	var one, cell *contract.Result
	var wg sync.WaitGroup
	way := func(name string, f func(*testing.T)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(name, f)
		}()
	}
	way("one-off", func(t *testing.T) {
		r, res := c.call(t, s, "")
		one = &r
		if r.Session != nil {
			t.Errorf("a one-off run answered a session: %+v", r.Session)
		}
		c.check(t, b, want, r, res)
	})
	way("session", func(t *testing.T) {
		sc := sessions.take(t, c)
		var got *contract.Result
		defer func() { sessions.give(t, sc, c, got) }()
		r, res := c.call(t, s, sc.id)
		got, cell = &r, &r
		c.checkSession(t, sc, r)
		w := want
		if c.inSession != nil {
			w = c.inSession.want
		}
		c.check(t, b, w, r, res)
	})
	wg.Wait()
	if one != nil && cell != nil && c.inSession == nil {
		t.Run("same", func(t *testing.T) { sameAnswer(t, c, want, *one, *cell) })
	}
}

// call runs c's program, in session id when not "".
func (c contractCase) call(t *testing.T, s *server, id string) (contract.Result, *mcp.CallToolResult) {
	args := map[string]any{"language": c.lang, "code": c.code}
	for k, v := range c.args {
		args[k] = v
	}
	if id != "" {
		args["session_id"] = id
	}
	return s.call(t, args)
}

// checkSession checks the session a cell's result names: its own, and
// alive unless the call timed out or ran out of memory (which lose the
// state, as documented) or the program ended its interpreter.
func (c contractCase) checkSession(t *testing.T, sc *cell, r contract.Result) {
	t.Helper()
	ref := r.Session
	if ref == nil || ref.ID != sc.id || ref.Call < 1 {
		t.Errorf("the cell's result names session %+v, want %s", ref, sc.id)
		return
	}
	losing := r.Error != nil && (r.Error.Kind == contract.KindTimeout || r.Error.Kind == contract.KindOOM)
	switch {
	case losing && ref.State != contract.SessionLost:
		t.Errorf("a %s keeps the session: %+v", r.Error.Kind, ref)
	case !losing && !c.exits && ref.State != contract.SessionAlive:
		t.Errorf("the session was lost: %s", ref.LostReason)
	}
}

// check fails unless r is the outcome w on backend b.
func (c contractCase) check(t *testing.T, b backend, w outcome, r contract.Result, res *mcp.CallToolResult) {
	t.Helper()
	if raw, _ := json.Marshal(res); strings.Contains(string(raw), fakeSecret) {
		t.Errorf("the server's secret reached the result")
	}
	if r.Isolation != b.isolation || r.Language != c.lang {
		t.Errorf("isolation %q language %q, want %q %q", r.Isolation, r.Language, b.isolation, c.lang)
	}
	if w.or != nil && r.Error != nil && r.Error.Kind == w.or.kind && r.Error.Limit == w.or.limit {
		w = *w.or
	}
	if w.kind == "" {
		mustOK(t, r)
		m := r.Metrics
		// A session's cell starts no process: it may take less than 1 ms.
		wall := m.WallMs > 0 || r.Session != nil && m.WallMs == 0
		if r.ExitCode == nil || *r.ExitCode != 0 || !wall || m.PeakMemoryBytes <= 0 || m.QueueMs < 0 || !strings.HasPrefix(r.Image, "sha256:") || !strings.HasPrefix(r.RunID, "r_") {
			t.Errorf("exit code %s, metrics %+v, image %q, run %q", exitCode(r), m, r.Image, r.RunID)
		}
	} else {
		e := wantError(t, r, w.kind, w.limit)
		if e.Syscall != "" && e.Syscall != w.syscall {
			t.Errorf("syscall %q, want %q or none", e.Syscall, w.syscall)
		}
	}
	if w.stdout != "" && r.Stdout != w.stdout {
		t.Errorf("stdout %q, want %q\nstderr: %.2000s", r.Stdout, w.stdout, r.Stderr)
	}
	if w.check != nil {
		w.check(t, r, res)
	}
}

// exitCode is a result's exit code as text.
func exitCode(r contract.Result) string {
	if r.ExitCode == nil {
		return "null"
	}
	return strconv.Itoa(*r.ExitCode)
}

// The checks the table's outcomes share.

func errorIs(typ, msg string, line, column int) func(*testing.T, contract.Result, *mcp.CallToolResult) {
	return func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
		t.Helper()
		e := r.Error
		if e.Type != typ || !strings.Contains(e.Message, msg) || e.Line != line || (column > 0 && e.Column != column) {
			t.Errorf("got %+v, want %s %q at %d:%d\nstderr: %s", e, typ, msg, line, column, r.Stderr)
		}
	}
}

// syntaxAt: the error is where it is, and nothing ran.
func syntaxAt(typ string, line, column int) outcome {
	at := errorIs(typ, "", line, column)
	return outcome{kind: contract.KindSyntax, check: func(t *testing.T, r contract.Result, res *mcp.CallToolResult) {
		at(t, r, res)
		if r.Stdout != "" {
			t.Errorf("code with a syntax error ran: %q", r.Stdout)
		}
	}}
}

func runtimeError(typ, msg string, line int) outcome {
	at := errorIs(typ, msg, line, 0)
	return outcome{kind: contract.KindRuntime, check: func(t *testing.T, r contract.Result, res *mcp.CallToolResult) {
		at(t, r, res)
		if r.ExitCode == nil || *r.ExitCode == 0 {
			t.Errorf("exit code %v", r.ExitCode)
		}
	}}
}

// timedOut: killed at the deadline, with the output before it (5 s: on a
// loaded machine an interpreter may take seconds to print its first line).
var timedOut = outcome{kind: contract.KindTimeout, limit: contract.LimitWallTime, check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
	if !strings.HasPrefix(r.Stdout, "started") {
		t.Errorf("output before the timeout is lost: %q", r.Stdout)
	}
	// Not before the deadline; after it, within a bound generous enough
	// for a loaded machine (the kill, not the pace, is asserted).
	if r.Metrics.WallMs < 5000 || r.Metrics.WallMs > 20000 {
		t.Errorf("killed after %d ms; the deadline was 5000 ms", r.Metrics.WallMs)
	}
}}

// truncated: the output is cut in the middle, its head and tail kept.
var truncated = outcome{kind: contract.KindOutputLimit, check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
	if !r.StdoutTruncated || !strings.HasPrefix(r.Stdout, "head\n") || !strings.HasSuffix(r.Stdout, "\ntail\n") || len(r.Stdout) > int(lim.OutputBytes)+200 {
		t.Errorf("truncated %v, %d bytes kept, head %q tail %q", r.StdoutTruncated, len(r.Stdout), r.Stdout[:min(10, len(r.Stdout))], r.Stdout[max(0, len(r.Stdout)-10):])
	}
}}

func limited(l contract.Limit) outcome { return outcome{kind: contract.KindResourceLimit, limit: l} }

var (
	oom   = outcome{kind: contract.KindOOM, limit: contract.LimitMemory}
	pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	// long is the deadline of the cases that run until a limit stops them
	// or take seconds of their own. It is sized for gVisor on a loaded
	// 2-core machine, where oom/bash and disk/inodes took over a minute;
	// a case that ends sooner ends sooner.
	long = map[string]any{"timeout_seconds": 180}
	// compiled is the deadline of the TypeScript cases: a cold box loads
	// the compiler and parses its libraries (seconds of CPU time), which
	// on a loaded machine took past the default 30 s.
	compiled = long
	stdinH   = map[string]any{"stdin": "hello stdin\n"}
)

func contractCases() []contractCase {
	return []contractCase{
		// Each language runs, as uid 1000, with none of the server's
		// environment.
		{name: "ok/python", lang: "python", args: stdinH,
			code: "import os, sys\nsys.stdout.write(sys.stdin.read().upper())\nprint(os.getuid(), os.environ.get('RUNBOX_TEST_SECRET'))\n",
			want: outcome{stdout: "HELLO STDIN\n1000 None\n"}},
		{name: "ok/javascript", lang: "javascript", args: stdinH,
			code: "let d = '';\nprocess.stdin.on('data', c => d += c).on('end', () => {\n  process.stdout.write(d.toUpperCase());\n  console.log(process.getuid(), process.env.RUNBOX_TEST_SECRET);\n});\n",
			want: outcome{stdout: "HELLO STDIN\n1000 undefined\n"}},
		{name: "ok/bash", lang: "bash", args: stdinH,
			code: "tr a-z A-Z\necho $(id -u) ${RUNBOX_TEST_SECRET:-unset}\n",
			want: outcome{stdout: "HELLO STDIN\n1000 unset\n"}},
		{name: "ok/python-packages", lang: "python", code: "import numpy\nprint(numpy.arange(4).sum())\n", want: outcome{stdout: "6\n"}},

		{name: "syntax/python", lang: "python", code: "x = 1\ny = 2\nprint(x +* y)\n", want: syntaxAt("SyntaxError", 3, 10)},
		{name: "syntax/python-indentation", lang: "python", code: "def f():\nreturn 1\n", want: syntaxAt("IndentationError", 2, 0)},
		{name: "syntax/javascript", lang: "javascript", code: "const a = 1;\nconst b = ;\n", want: syntaxAt("SyntaxError", 2, 11)},
		{name: "syntax/typescript", lang: "typescript", args: compiled, code: "console.log('before');\nconst s: string = 1;\n", want: syntaxAt("TS2322", 2, 7)},
		{name: "syntax/bash-unclosed", lang: "bash", code: "echo start\nif true; then\n  echo x\n", want: syntaxAt("", 4, 0)},
		{name: "syntax/bash-token", lang: "bash", code: "echo one\necho two )\n", want: syntaxAt("", 2, 0)},

		{name: "runtime/python", lang: "python", code: "import numpy as np\n\ndef div(a):\n    return 1 // a\n\nprint('before')\ndiv(0)\n",
			want: runtimeError("ZeroDivisionError", "integer division or modulo by zero", 4)},
		{name: "runtime/python-module", lang: "python", code: "import json\njson.loads('{bad')\n",
			want: runtimeError("json.decoder.JSONDecodeError", "Expecting property name", 2)},
		{name: "runtime/javascript", lang: "javascript", code: "console.log('before');\nfunction f() {\n  return missing + 1;\n}\nf();\n",
			want: runtimeError("ReferenceError", "missing is not defined", 3)},
		{name: "runtime/javascript-async", lang: "javascript", code: "class Oops extends Error {}\nsetTimeout(() => { throw new TypeError('late'); }, 10);\n",
			want: runtimeError("TypeError", "late", 2)},
		{name: "runtime/typescript", lang: "typescript", args: compiled, code: "console.log('before');\nfunction f(xs: number[]): number {\n  return xs.reduce((a, b) => a + b) / (xs.length ? 1 : (null as any).n);\n}\nf([]);\n",
			want: runtimeError("TypeError", "Reduce of empty array with no initial value", 3)},
		{name: "runtime/bash", lang: "bash", code: "echo before\nno_such_command --flag\n",
			want: runtimeError("", "no_such_command: command not found", 2)},
		{name: "runtime/exit-status", lang: "bash", code: "echo partial; exit 7", exits: true, want: outcome{kind: contract.KindRuntime, stdout: "partial\n",
			check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if r.ExitCode == nil || *r.ExitCode != 7 || !strings.Contains(r.Error.Message, "status 7") {
					t.Errorf("exit code %v, error %+v", r.ExitCode, r.Error)
				}
			}}},

		// Programs that ignore SIGTERM.
		{name: "timeout/python", lang: "python", args: map[string]any{"timeout_seconds": 5}, want: timedOut,
			code: "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.01)\n"},
		{name: "timeout/javascript", lang: "javascript", args: map[string]any{"timeout_seconds": 5}, want: timedOut,
			code: "process.on('SIGTERM', () => {});\nconsole.log('started');\nwhile (true) {}\n"},
		{name: "timeout/bash", lang: "bash", args: map[string]any{"timeout_seconds": 5}, want: timedOut,
			code: "trap '' TERM INT\necho started\nwhile :; do :; done\n"},

		// Quiet for longer than any timer of the box channel's: a run
		// lasts as long as its deadline allows.
		{name: "long/quiet", lang: "bash", args: long, code: "echo start; sleep 11; echo done", want: outcome{stdout: "start\ndone\n"}},

		{name: "oom/python", lang: "python", args: long, want: oom, code: "blocks = []\nwhile True:\n    blocks.append(bytearray(32 * 1024 * 1024))\n"},
		{name: "oom/python-one-allocation", lang: "python", args: long, want: oom, code: "x = bytearray(2 * 1024**3)\nprint(len(x))\n"},
		{name: "oom/javascript", lang: "javascript", args: long, want: oom, code: "const keep = [];\nwhile (true) { keep.push(Buffer.alloc(32 * 1024 * 1024, 1)); }\n"},
		// A string doubled in memory: reading 2 GB through a pipe into a
		// variable took over a minute under gVisor on a loaded machine.
		{name: "oom/bash", lang: "bash", args: long, want: oom, code: "x=a\nwhile :; do x=$x$x; done\n"},

		// bash retries a failed fork for about 15 s: its children outlive
		// that, so no retry succeeds because earlier ones have ended.
		// bash exits when a fork fails for good: in a session, its
		// interpreter.
		{name: "pids/bash", lang: "bash", args: long, alone: true, exits: true, want: limited(contract.LimitPids), code: "for i in $(seq 1 400); do sleep 60 & done; wait"},
		{name: "pids/python", lang: "python", args: long, alone: true, want: limited(contract.LimitPids),
			code: "import os, time\nkids = []\nfor i in range(400):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(5); os._exit(0)\n    kids.append(pid)\n",
			on: map[string]outcome{
				// Each process is an address space of gVisor's on the
				// host: 128 Python processes may pass 512 MiB before the
				// process limit (docs/security.md).
				"gvisor": {kind: contract.KindResourceLimit, limit: contract.LimitPids, or: &outcome{kind: contract.KindOOM, limit: contract.LimitMemory}},
			}},
		{name: "pids/javascript", lang: "javascript", args: long, alone: true, want: limited(contract.LimitPids),
			code: "const { spawn } = require('child_process');\nfor (let i = 0; i < 400; i++) spawn('sleep', ['5']);\n"},

		{name: "disk/python", lang: "python", args: long, want: limited(contract.LimitDisk),
			code: "with open('big.bin', 'wb') as f:\n    for _ in range(200):\n        f.write(b'x' * (1 << 20))\n"},
		{name: "disk/javascript", lang: "javascript", args: long, want: limited(contract.LimitDisk),
			code: "const fs = require('fs');\nconst mb = Buffer.alloc(1 << 20, 120);\nfor (let i = 0; i < 200; i++) fs.appendFileSync('big.bin', mb);\n"},
		{name: "disk/tmp", lang: "bash", args: long, want: limited(contract.LimitDisk), code: "head -c 200000000 /dev/zero > /tmp/fill"},
		// A sparse file past the fsize limit, which no tmpfs size catches.
		{name: "disk/file-size", lang: "python", args: long, want: limited(contract.LimitDisk), code: "with open('/tmp/big', 'wb') as f:\n    f.truncate(1 << 40)\n"},
		{name: "disk/inodes", lang: "bash", args: long, exits: true, want: limited(contract.LimitDisk),
			code: "mkdir many && cd many && for i in $(seq 1 20000); do : > f$i || exit 1; done",
			on: map[string]outcome{
				// runsc ignores nr_inodes on tmpfs (docs/security.md).
				"gvisor": {},
				// Podman refuses the nr_inodes mount option and the API has
				// no other way to cap inodes (docs/podman.md).
				"podman": {},
				// A memory emptyDir has no inode cap (docs/security.md).
				"kubernetes": {},
			}},

		{name: "open_files/python", lang: "python", args: long, alone: true, want: limited(contract.LimitOpenFiles), code: "fs = [open('/dev/null') for _ in range(5000)]\n"},
		{name: "open_files/javascript", lang: "javascript", args: long, alone: true, want: limited(contract.LimitOpenFiles),
			code: "const fs = require('fs');\nconst fds = [];\nfor (let i = 0; i < 5000; i++) fds.push(fs.openSync('/dev/null', 'r'));\n"},
		{name: "open_files/bash", lang: "bash", args: long, alone: true, exits: true, want: limited(contract.LimitOpenFiles), code: "for i in $(seq 1 5000); do exec {fd}</dev/null || exit 1; done"},

		{name: "output/python", lang: "python", want: truncated, code: "print('head\\n' + 'x' * 3000000 + '\\ntail')\n"},
		{name: "output/javascript", lang: "javascript", want: truncated, code: "process.stdout.write('head\\n' + 'x'.repeat(3000000) + '\\ntail\\n');\n"},
		{name: "output/bash", lang: "bash", want: truncated, code: "echo head; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo tail"},
		{name: "output/binary", lang: "bash", code: "head -c 100000 /dev/urandom", varies: true, want: outcome{check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
			if !strings.Contains(r.Stdout, "\uFFFD") {
				t.Errorf("binary output is not turned into valid text")
			}
		}}},

		// Killed at the call by runbox's seccomp profile.
		// The kill ends the interpreter of a session.
		{name: "forbidden_syscall/python", lang: "python", code: pySyscall(101), exits: true,
			want: outcome{kind: contract.KindForbiddenSyscall, syscall: "ptrace", stdout: "calling\n"},
			on: map[string]outcome{
				// runsc traps the call in its own kernel: no kernel log
				// names it (docs/security.md).
				"gvisor": {kind: contract.KindForbiddenSyscall, stdout: "calling\n"},
				// The node's kernel log is not the server's.
				"kubernetes": {kind: contract.KindForbiddenSyscall, stdout: "calling\n"},
			}},
		{name: "forbidden_syscall/bash", lang: "bash", code: "echo trying\nunshare -U true\n",
			want: outcome{kind: contract.KindForbiddenSyscall, syscall: "unshare", stdout: "trying\n"},
			on: map[string]outcome{
				"gvisor":     {kind: contract.KindForbiddenSyscall, stdout: "trying\n"}, // as above
				"kubernetes": {kind: contract.KindForbiddenSyscall, stdout: "trying\n"}, // as above
			}},

		{name: "no_network", lang: "python", code: `import os, socket
for host in [("1.1.1.1", 443), ("172.17.0.1", 2375), ("169.254.169.254", 80), ("10.96.0.1", 443), ("kubernetes.default.svc", 443)]:
    try:
        socket.create_connection(host, timeout=3)
        print("ESCAPED: reached", host)
    except OSError:
        pass
print("token", os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token"))
print("services", sorted(k for k in os.environ if k.endswith("_SERVICE_HOST")))
print("interfaces", [n for _, n in socket.if_nameindex()])
`, want: outcome{stdout: "token False\nservices []\ninterfaces ['lo']\n"}},

		// No capability, no way to gain one, runbox's seccomp filter on
		// (asked of the kernel: gVisor's /proc/self/status has no
		// NoNewPrivs line).
		{name: "privileges", lang: "python", code: `import ctypes
libc = ctypes.CDLL(None)
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print("caps", status["CapEff"].strip(), status["CapBnd"].strip())
print("no_new_privs", libc.prctl(39, 0, 0, 0, 0), "seccomp", libc.prctl(21, 0, 0, 0, 0))
`, want: outcome{stdout: "caps 0000000000000000 0000000000000000\nno_new_privs 1 seccomp 2\n"}},

		// Nothing is writable but /workspace and /tmp.
		{name: "read_only_root", lang: "bash",
			code: "for p in /x /etc/x /usr/bin/x /.runbox/x /dev/shm/x /var/tmp/x /run/x; do touch $p 2>/dev/null && echo \"WROTE $p\"; done\ntouch /workspace/ok /tmp/ok && echo writable",
			want: outcome{stdout: "writable\n"}},

		{name: "artifacts/files", lang: "python", code: `
import os, shutil
from helper import greet
print(greet(open("data/in.txt").read().strip()))
os.makedirs("out", exist_ok=True)
shutil.copy("pixel.png", "out/copy.png")
open("out/report.csv", "w").write("a,b\n1,2\n")
open("/tmp/scratch", "w").write("not an artifact")
os.symlink("/etc/passwd", "out/passwd")
os.symlink("/proc/self/environ", "env")
`, args: map[string]any{"files": []any{
			map[string]any{"path": "helper.py", "content": "def greet(n):\n    return 'hello ' + n\n"},
			map[string]any{"path": "data/in.txt", "content": "files\n"},
			map[string]any{"path": "pixel.png", "content": pixel, "encoding": "base64"},
		}}, want: outcome{stdout: "hello files\n", check: wantArtifacts}},
		{name: "artifacts/count-cap", lang: "bash", code: "mkdir -p out; for i in $(seq 1 100); do echo $i > out/f$(printf %03d $i).txt; done",
			want: outcome{check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if len(r.Artifacts) != lim.Artifacts || r.ArtifactsOmitted != 100-lim.Artifacts {
					t.Errorf("%d artifacts, %d omitted", len(r.Artifacts), r.ArtifactsOmitted)
				}
			}}},
		{name: "artifacts/byte-cap", lang: "bash", code: "head -c 40000000 /dev/zero > a.bin; echo small > b.txt",
			want: outcome{check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if len(r.Artifacts) != 2 || !r.Artifacts[0].ContentOmitted || r.Artifacts[0].SizeBytes != 40000000 || r.Artifacts[1].ContentOmitted {
					t.Errorf("byte cap: %+v", r.Artifacts)
				}
			}}},
		// Three files past the byte budget together: the content of those
		// that fit, the last one's metadata only.
		{name: "artifacts/byte-budget", lang: "bash", code: "for i in 1 2 3; do head -c 12000000 /dev/zero > f$i.bin; done",
			want: outcome{check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				a := r.Artifacts
				if len(a) != 3 || a[0].ContentOmitted || a[1].ContentOmitted || !a[2].ContentOmitted || a[2].Path != "f3.bin" || a[2].SizeBytes != 12000000 {
					t.Errorf("byte budget: %+v", a)
				}
			}}},
		// Links are never followed nor returned: to a file of the
		// workspace, to the root, to the workspace itself.
		{name: "artifacts/links", lang: "bash", code: "mkdir out\necho a > out/a.txt\nln -s a.txt out/b.txt\nln -s / out/root\nln -s /workspace loop\nln -s /etc/passwd passwd\n",
			want: outcome{check: artifactsAre("out/a.txt")}},
		// A FIFO is not read (which would block): it is no artifact.
		{name: "artifacts/fifo", lang: "bash", code: "mkfifo pipe\nmkdir out && mkfifo out/pipe\necho ok > out/real.txt\n",
			want: outcome{check: artifactsAre("out/real.txt")}},

		// Output past its cap on stderr.
		{name: "output/stderr", lang: "bash", code: "echo head >&2; head -c 3000000 /dev/zero | tr '\\0' x >&2; echo >&2; echo tail >&2",
			want: outcome{kind: contract.KindOutputLimit, check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if !r.StderrTruncated || r.StdoutTruncated || !strings.HasPrefix(r.Stderr, "head\n") || !strings.HasSuffix(r.Stderr, "\ntail\n") {
					t.Errorf("stderr truncated %v (stdout %v), %d bytes kept", r.StderrTruncated, r.StdoutTruncated, len(r.Stderr))
				}
			}}},

		// stdin as bytes, and read line by line.
		{name: "stdin/python-bytes", lang: "python", args: map[string]any{"stdin": "héllo wörld\n"},
			code: "import sys\ndata = sys.stdin.buffer.read()\nprint(len(data), data.decode().upper(), end='')\n",
			want: outcome{stdout: "14 HÉLLO WÖRLD\n"}},
		{name: "stdin/bash-lines", lang: "bash", args: map[string]any{"stdin": "one\ntwo  three\n"},
			code: "n=0\nwhile read -r line; do n=$((n+1)); echo \"$n:$line\"; done\necho \"lines $n\"\n",
			want: outcome{stdout: "1:one\n2:two  three\nlines 2\n"}},
		{name: "stdin/javascript-none", lang: "javascript",
			code: "let got = '';\nprocess.stdin.on('data', c => got += c).on('end', () => console.log('stdin', JSON.stringify(got)));\n",
			want: outcome{stdout: "stdin \"\"\n"}},

		// Input files, nested and binary; the one the code changes comes
		// back as an artifact, the others do not.
		{name: "files/bash", lang: "bash", code: "cat data/a.txt deep/er/b.txt\nwc -c < bin.dat\necho more >> data/a.txt\n",
			args: map[string]any{"files": []any{
				map[string]any{"path": "data/a.txt", "content": "alpha\n"},
				map[string]any{"path": "deep/er/b.txt", "content": "beta\n"},
				map[string]any{"path": "bin.dat", "content": pixel, "encoding": "base64"},
			}},
			want: outcome{stdout: "alpha\nbeta\n70\n", check: artifactsAre("data/a.txt")}},

		// JavaScript programs that once answered otherwise in a session
		// than in a one-off run: an exception after an await, an exit, a
		// JSON.parse error's line, a timer that never ends.
		{name: "runtime/javascript-after-await", lang: "javascript",
			code: "async function main() {\n  await null;\n  throw new TypeError('bad shape');\n}\nmain();\n",
			want: runtimeError("TypeError", "bad shape", 3)},
		{name: "runtime/javascript-exit", lang: "javascript", code: "console.log('x'); process.exit(4)", exits: true,
			want: outcome{kind: contract.KindRuntime, stdout: "x\n", check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if r.ExitCode == nil || *r.ExitCode != 4 {
					t.Errorf("exit code %v, error %+v", r.ExitCode, r.Error)
				}
			}}},
		{name: "runtime/javascript-json", lang: "javascript", code: "const text = '{\"a\": 1,}';\nconst data = JSON.parse(text);\nconsole.log(data);\n",
			want: runtimeError("SyntaxError", "JSON", 2)},
		// alone: a session that kept the timer (it must not) would tick
		// into later cells.
		{name: "timeout/javascript-interval", lang: "javascript", args: map[string]any{"timeout_seconds": 5}, varies: true, alone: true,
			code: "setInterval(() => console.log('tick'), 200);\n",
			want: outcome{kind: contract.KindTimeout, limit: contract.LimitWallTime, check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if !strings.HasPrefix(r.Stdout, "tick\n") {
					t.Errorf("output before the timeout is lost: %q", r.Stdout)
				}
			}}},

		// Rich results: a figure shown, a frame displayed, console.table,
		// each at its place in the output. long: importing matplotlib or
		// pandas takes seconds on a loaded node of a quarter CPU.
		{name: "display/python-show", lang: "python", args: long,
			code: "import matplotlib.pyplot as plt\nprint('a')\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3])\nplt.show()\nprint('b')\n",
			want: outcome{stdout: "a\nb\n", check: wantFigure(400, 300)}},
		{name: "display/python-frame", lang: "python", args: long,
			code: "import pandas as pd\nprint('frame')\ndisplay(pd.DataFrame({'a': range(1000), 'b': 0.5, 'c': 'x'}))\nprint('next')\n",
			want: outcome{stdout: "frame\nnext\n", check: wantTable("display", 1000, 3)}},
		// Node's own text table stays in stdout, before the display.
		{name: "display/javascript-table", lang: "javascript",
			code: "console.log('first');\nconsole.table([{a: 1, b: 'x'}, {a: 2, b: 'y'}, {a: 3}]);\nconsole.log('next');\n",
			want: outcome{check: wantTable("table", 3, 2)}},

		// A session's own: the value of a Python cell's last expression
		// is shown (as a notebook shows it); a one-off run shows nothing.
		{name: "session/last-expression", lang: "python", code: "x = 41\nx + 1\n",
			want: outcome{check: func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
				if r.Stdout != "" {
					t.Errorf("a one-off run showed a value: %q", r.Stdout)
				}
			}},
			inSession: &sessionWay{why: "a session shows a Python cell's last expression (docs/design.md)", want: outcome{stdout: "42\n"}}},
	}
}

// wantFigure: one figure shown, after the first line of output, as a PNG
// of w x h pixels: in the result's display, and in the answer's one image
// block, whose bytes decode to that size.
func wantFigure(w, h int) func(*testing.T, contract.Result, *mcp.CallToolResult) {
	return func(t *testing.T, r contract.Result, res *mcp.CallToolResult) {
		t.Helper()
		if len(r.Displays) != 1 || r.DisplaysOmitted != 0 {
			t.Fatalf("want one display: %+v", r.Displays)
		}
		d := r.Displays[0]
		m, ok := d.Mimes["image/png"]
		if d.Source != "show" || d.Index != 0 || d.After.Stdout != 2 || !ok || m.Width != w || m.Height != h || m.URI != contract.DisplayURI(r.RunID, 0, "image.png") || d.Cut != "" {
			t.Errorf("the figure's display: %+v", d)
		}
		var images []mcp.ImageContent
		for _, c := range res.Content {
			if im, ok := mcp.AsImageContent(c); ok {
				images = append(images, *im)
			}
		}
		if len(images) != 1 || images[0].MIMEType != "image/png" {
			t.Fatalf("want one PNG image block, got %d", len(images))
		}
		b, err := base64.StdEncoding.DecodeString(images[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("the image does not decode: %v", err)
		}
		if sz := img.Bounds().Size(); sz.X != w || sz.Y != h || int64(len(b)) != m.Bytes {
			t.Errorf("the image is %v of %d bytes, want %dx%d of %d", sz, len(b), w, h, m.Bytes)
		}
	}
}

// wantTable: one display from source, in stdout just before the line
// "next", a table of rows x cols, which the answer's text gives as
// markdown ending with that shape.
func wantTable(source string, rows, cols int64) func(*testing.T, contract.Result, *mcp.CallToolResult) {
	return func(t *testing.T, r contract.Result, res *mcp.CallToolResult) {
		t.Helper()
		if len(r.Displays) != 1 {
			t.Fatalf("want one display: %+v", r.Displays)
		}
		d := r.Displays[0]
		m, ok := d.Mimes[contract.TableMime]
		next := strings.Index(r.Stdout, "next\n")
		if d.Source != source || next < 0 || d.After.Stdout != int64(next) || !ok || m.Rows == nil || *m.Rows != rows || m.Columns == nil || *m.Columns != cols || m.URI == "" {
			t.Fatalf("the table's display: %+v", d)
		}
		shape := fmt.Sprintf("%d rows x %d columns)", rows, cols)
		var text string
		for _, c := range res.Content {
			if tc, ok := mcp.AsTextContent(c); ok {
				text += tc.Text
			}
		}
		if !strings.HasSuffix(m.Markdown, shape) || !strings.Contains(text, m.Markdown) {
			t.Errorf("the answer's text has no markdown table ending %q:\n%s", shape, text)
		}
	}
}

// artifactsAre: the run's artifacts are those files, in that order.
func artifactsAre(paths ...string) func(*testing.T, contract.Result, *mcp.CallToolResult) {
	return func(t *testing.T, r contract.Result, _ *mcp.CallToolResult) {
		t.Helper()
		var got []string
		for _, a := range r.Artifacts {
			got = append(got, a.Path)
		}
		if strings.Join(got, ",") != strings.Join(paths, ",") || r.ArtifactsOmitted != 0 {
			t.Errorf("artifacts %v (%d left out), want %v", got, r.ArtifactsOmitted, paths)
		}
	}
}

// wantArtifacts: the files the code made in /workspace, not the inputs, the
// code, /tmp or symlinks; the image also as an image block.
func wantArtifacts(t *testing.T, r contract.Result, res *mcp.CallToolResult) {
	var got []string
	for _, a := range r.Artifacts {
		got = append(got, a.Path+":"+a.MimeType)
		if len(a.SHA256) != 64 || a.SizeBytes <= 0 || a.URI != contract.ArtifactURI(r.RunID, a.Path) {
			t.Errorf("artifact %+v", a)
		}
	}
	if strings.Join(got, ",") != "out/copy.png:image/png,out/report.csv:text/csv" {
		t.Fatalf("artifacts %v", got)
	}
	raw, _ := base64.StdEncoding.DecodeString(pixel)
	csv := sha256.Sum256([]byte("a,b\n1,2\n"))
	if r.Artifacts[0].SizeBytes != int64(len(raw)) || r.Artifacts[1].SizeBytes != 8 || r.Artifacts[1].SHA256 != hex.EncodeToString(csv[:]) {
		t.Errorf("artifacts %+v", r.Artifacts)
	}
	var images int
	for _, c := range res.Content {
		if _, ok := mcp.AsImageContent(c); ok {
			images++
		}
	}
	if images != 1 {
		t.Errorf("image content blocks: %d", images)
	}
}

// secretEnv puts the fake secret in a server's environment.
var secretEnv = []string{"RUNBOX_TEST_SECRET=" + fakeSecret, "AWS_SECRET_ACCESS_KEY=" + fakeSecret}

// dockerServer starts a server on the Docker engine (TestMain has checked
// that it is there) with manifest and the fake secret.
func dockerServer(t *testing.T, manifest string) *server {
	t.Helper()
	return engineServer(t, "", manifest)
}

// boxRemoval bounds the wait for a box's removal, which runs after the
// answer (a session's after session_close's): its kill and its removal
// have a deadline each (sandbox.KillTimeout, sandbox.APITimeout), more
// than 10 s together, and with two busy loops beside the suite a gVisor
// box's removal once took past 10 s. A box never removed still fails.
const boxRemoval = 60 * time.Second

// engineServer starts a server on the engine at host ("" for the
// default) and, at the end of the test, closes it and checks that it left
// no box there.
func engineServer(t *testing.T, host, manifest string) *server {
	t.Helper()
	env := secretEnv
	if host != "" {
		env = append([]string{"DOCKER_HOST=" + host}, env...)
	}
	s := startServer(t, env, "--manifest", writeManifest(t, "audit:\n  enabled: false\n"+manifest))
	s.host = host
	t.Cleanup(func() {
		s.close()
		pid := strconv.Itoa(s.cmd.Process.Pid)
		deadline := time.Now().Add(boxRemoval)
		for left := engineBoxes(t, host, pid); len(left) > 0; left = engineBoxes(t, host, pid) {
			if time.Now().After(deadline) {
				t.Errorf("boxes left behind: %v", left)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		// A removal the engine did not answer in time (a loaded machine)
		// is retried by the reaper, and the wait above saw it done; any
		// other failure is a defect.
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(line, "removing box failed") && !strings.Contains(line, "context deadline exceeded") {
				t.Errorf("a box was not removed at once:\n%s", line)
			}
		}
	})
	return s
}

// engineBoxes lists the boxes of the server with pid on the engine at host.
func engineBoxes(t *testing.T, host, pid string, filters ...string) []string {
	t.Helper()
	args := []string{"ps", "-aq", "--filter", "label=" + sandbox.LabelManaged + "=true", "--filter", "label=" + sandbox.LabelOwnerPID + "=" + pid}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	if host != "" {
		args = append([]string{"-H", host}, args...)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("listing boxes: %v", err)
	}
	return strings.Fields(string(out))
}
