//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// The hostile suite of runbox-init, the channel and sessions: box code that
// attacks PID 1 (signals, ptrace, /proc/1, its descriptors), the streams it
// reads (floods, lines without end, bytes that are not text), the box's
// writable space it needs, and a session's interpreter (threads and
// processes left running, interrupt storms, an interpreter that exits or
// whose builtins are replaced). Each case asserts what must not happen —
// an answer that blames the operator (sandbox), a lost report, a hang, a
// box left behind (engineServer's cleanup) — and that the next call, and
// for a session the next cell, answers normally. Every case runs on runc
// and on gVisor.

// initBackends are the isolation levels the suite runs on.
var initBackends = []struct {
	name  string
	start func(*testing.T, string) *server
}{{"docker", dockerServer}, {"gvisor", gvisorServer}}

// hostileLimits keep the writable space small, so that filling it is quick.
const hostileLimits = "limits:\n  tmp_size: 16MiB\n  workspace_size: 16MiB\n  max_input_bytes: 8MiB\n  workspace_inodes: 4096\n  pids: 64\n"

// notSandbox fails when the answer blames the operator for what the code did.
func notSandboxNorEscape(t *testing.T, r contract.Result) {
	t.Helper()
	if r.Error != nil && r.Error.Kind == contract.KindSandbox {
		t.Fatalf("the program's own act answered as sandbox: %+v\nstdout: %.1000s\nstderr: %.1000s", r.Error, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout+r.Stderr, "ESCAPED") {
		t.Fatalf("an attempt succeeded:\nstdout: %.2000s\nstderr: %.2000s", r.Stdout, r.Stderr)
	}
}

// nextAnswers: a plain run on the same server answers normally.
func nextAnswers(t *testing.T, s *server) {
	t.Helper()
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo next"})
	if mustOK(t, r); r.Stdout != "next\n" {
		t.Fatalf("the next call: %q", r.Stdout)
	}
}

// Defect: `kill -SEGV 1` (and BUS, FPE, ILL, TRAP, ABRT, SYS, STKFLT) ended
// runbox-init, Go's runtime keeping those signals for itself, and the run
// answered sandbox ("the box ended without a report"). Every signal, by
// every way of sending one, must leave PID 1 serving.
func TestInitSurvivesSignalsFromTheBox(t *testing.T) {
	for _, b := range initBackends {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, "")
			for _, c := range []struct{ name, lang, code string }{
				{"kill the fault signals", "bash", "for s in SEGV BUS FPE ILL TRAP ABRT SYS STKFLT QUIT; do kill -s $s 1 2>/dev/null; done\nsleep 0.5\necho alive"},
				{"kill every signal", "bash", "for s in $(seq 1 64); do kill -s $s 1 2>/dev/null; done\nsleep 0.5\necho alive"},
				{"sigqueue every signal", "python", sigqueueAll},
				{"tgkill each of its threads", "python", tgkillThreads},
			} {
				t.Run(c.name, func(t *testing.T) {
					r, _ := s.call(t, map[string]any{"language": c.lang, "code": c.code})
					notSandboxNorEscape(t, r)
					if mustOK(t, r); !strings.HasSuffix(r.Stdout, "alive\n") {
						t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
					}
					nextAnswers(t, s)
				})
			}
		})
	}
}

// sigqueueAll sends PID 1 every signal with sigqueue(3): si_code SI_QUEUE,
// which Go's runtime takes for a fault of its own when it handles one.
const sigqueueAll = `import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
for sig in range(1, 65):
    libc.sigqueue(1, sig, ctypes.c_void_p(0))
time.sleep(0.5)
print("alive")
`

// tgkillThreads sends each thread of PID 1 the fault signals.
const tgkillThreads = `import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_tgkill = 234 if os.uname().machine == "x86_64" else 131
for tid in os.listdir("/proc/1/task"):
    for sig in (4, 5, 6, 7, 8, 11, 16, 31):
        libc.syscall(SYS_tgkill, 1, int(tid), sig)
time.sleep(0.5)
print("alive")
`

// Defect: the same signal in a session lost the session (its box ended).
func TestInitSignalKeepsTheSession(t *testing.T) {
	for _, b := range initBackends {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, "")
			id := s.open(t, "bash")
			r := s.in(t, id, "bash", "V=kept; kill -SEGV 1; kill -BUS 1; kill -ABRT 1; sleep 0.5")
			notSandboxNorEscape(t, r)
			mustOK(t, r)
			if r := s.in(t, id, "bash", "echo $V"); r.Stdout != "kept\n" || r.Session == nil || r.Session.State != contract.SessionAlive {
				t.Fatalf("after the signals: %q %+v %+v", r.Stdout, r.Error, r.Session)
			}
			pid := s.open(t, "python")
			// The program may not signal PID 1 at all: the refusal is the
			// program's own error.
			r = s.in(t, pid, "python", "import os, signal, time\nx = 5\nos.kill(1, signal.SIGSEGV)\ntime.sleep(0.5)")
			if e := wantError(t, r, contract.KindRuntime, ""); e.Type != "PermissionError" {
				t.Fatalf("python's kill of PID 1: %+v", e)
			}
			if r := s.in(t, pid, "python", "print(x)"); r.Stdout != "5\n" {
				t.Fatalf("python after the signal: %q %+v", r.Stdout, r.Error)
			}
			for _, sid := range []string{id, pid} {
				s.tool(t, "session_close", map[string]any{"session_id": sid})
			}
			nextAnswers(t, s)
		})
	}
}

// Defect: a cell that filled /tmp left every later cell failing as sandbox
// ("runbox-init: writing stdin: no space left on device", even with empty
// stdin), the cell that would clean up included, while the session said
// alive. The filling cell is the program's disk limit; the next cells run,
// stdin and all, and can clean up.
func TestFullWritableSpaceKeepsTheSession(t *testing.T) {
	fill := map[string]string{
		"python": "import os\ni = 0\nwhile True:\n    with open(f'%s/fill{i}', 'wb') as f:\n        f.write(b'x' * (1 << 20))\n    i += 1\n",
		"bash":   "i=0\nwhile head -c 1048576 /dev/zero > %s/fill$i; do i=$((i+1)); done\nfalse\n",
	}
	echo := map[string]string{"python": "import sys\nprint(sys.stdin.read())", "bash": "cat; echo"}
	clean := map[string]string{"python": "import glob\nfor p in glob.glob('%s/fill*'):\n    os.remove(p)\nprint('clean')", "bash": "rm -f %s/fill*; echo clean"}
	for _, b := range initBackends {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, hostileLimits)
			for _, lang := range []string{"python", "bash"} {
				for _, dir := range []string{"/tmp", "/workspace"} {
					t.Run(lang+" "+dir, func(t *testing.T) {
						id := s.open(t, lang)
						r := s.in(t, id, lang, fmt.Sprintf(fill[lang], dir))
						notSandboxNorEscape(t, r)
						wantError(t, r, contract.KindResourceLimit, contract.LimitDisk)
						for _, stdin := range []string{"", "hello"} {
							r = s.in(t, id, lang, echo[lang], "stdin", stdin)
							if notSandboxNorEscape(t, r); r.Status != contract.StatusOK || r.Stdout != stdin+"\n" {
								t.Fatalf("a cell after the disk filled (stdin %q): %s %+v %q %q", stdin, r.Status, r.Error, r.Stdout, r.Stderr)
							}
						}
						if r := s.in(t, id, lang, fmt.Sprintf(clean[lang], dir)); r.Stdout != "clean\n" {
							t.Fatalf("the cleaning cell: %+v %q %q", r.Error, r.Stdout, r.Stderr)
						}
						mustOK(t, s.in(t, id, lang, echo[lang], "stdin", "again"))
						s.tool(t, "session_close", map[string]any{"session_id": id})
					})
				}
			}
			nextAnswers(t, s)
		})
	}
}

// hostileRun is one-off box code against runbox-init and the channel.
type hostileRun struct {
	name, lang, code string
	args             []any // extra run_code arguments, name then value
	// want checks the answer beyond notSandbox; nil: any answer.
	want func(t *testing.T, r contract.Result)
}

// gvisorHoles are the holes cases find under gVisor that are not closed
// yet: those cases are skipped there, saying so. Under gVisor runbox-init's
// non-dumpable flag does not close its /proc entries to the program, which
// runs as the same uid.
var gvisorHoles = map[string]string{
	"read PID 1's memory, environment and descriptors": "/proc/1/{environ,maps} read, and /proc/1/fd/0 opens (a read waits on the channel's stdin)",
	"write PID 1's descriptors and memory":             "/proc/1/fd/{1,2} open for writing: garbage on the channel ends the run as sandbox",
}

func anyOK(t *testing.T, r contract.Result) { t.Helper(); mustOK(t, r) }

func kindIs(kinds ...contract.Kind) func(*testing.T, contract.Result) {
	return func(t *testing.T, r contract.Result) {
		t.Helper()
		for _, k := range kinds {
			if (k == "" && r.Error == nil) || (r.Error != nil && r.Error.Kind == k) {
				return
			}
		}
		t.Fatalf("want one of %q, got %s %+v\nstderr: %.1000s", kinds, r.Status, r.Error, r.Stderr)
	}
}

func stdoutLacks(words ...string) func(*testing.T, contract.Result) {
	return func(t *testing.T, r contract.Result) {
		t.Helper()
		for _, w := range words {
			if strings.Contains(r.Stdout, w) {
				t.Fatalf("stdout has %q:\n%.2000s", w, r.Stdout)
			}
		}
	}
}

func hostileRuns() []hostileRun {
	return []hostileRun{
		{"ptrace attach PID 1", "python", "import ctypes\nr = ctypes.CDLL(None, use_errno=True).ptrace(16, 1, 0, 0)\nprint('ESCAPED' if r == 0 else 'refused')", nil, nil},
		{"read PID 1's memory, environment and descriptors", "bash",
			"for f in /proc/1/mem /proc/1/environ /proc/1/maps /proc/1/fd/0 /proc/1/fd/1 /proc/1/fd/3; do timeout 2 head -c 1 $f >/dev/null 2>&1 && echo \"ESCAPED read $f\"; done\nls /proc/1/fd >/dev/null 2>&1 && echo 'ESCAPED listed fds'\necho done", nil, anyOK},
		{"write PID 1's descriptors and memory", "bash",
			"for f in /proc/1/fd/0 /proc/1/fd/1 /proc/1/fd/2 /proc/1/mem /proc/1/oom_score_adj /proc/1/comm; do (echo garbage > $f) 2>/dev/null && echo \"ESCAPED wrote $f\"; done\necho done", nil, anyOK},
		{"garbage to every inherited descriptor", "python",
			"import os\nfor fd in range(3, 1024):\n    try:\n        os.write(fd, b'\\x00garbage\\xff' * 1000)\n        print('wrote', fd)\n    except OSError:\n        pass\nprint('done')", nil, stdoutIs("done\n")},
		{"close and dup stdio", "bash", "exec 3>&1; exec 1>&- 2>&- 0<&-; echo lost; exec 1>&3; echo back", nil, nil},
		{"close stdio and leave", "python", "import os\nos.close(0); os.close(1); os.close(2)", nil, nil},
		{"fork storm within the pids limit", "bash", "for i in $(seq 1 200); do sleep 30 & done 2>/dev/null; wait", []any{"timeout_seconds", 5},
			kindIs(contract.KindResourceLimit, contract.KindTimeout)},
		{"background holds stdout after the program ends", "bash", "(sleep 300; echo late) &\nsetsid sleep 300 >/dev/stdout 2>&1 &\necho bye", nil, stdoutIs("bye\n")},
		{"a huge line without newline", "bash", "head -c 20000000 /dev/zero | tr '\\0' a", nil, kindIs(contract.KindOutputLimit)},
		{"invalid UTF-8 and NUL bytes", "bash", "printf 'a\\xff\\xfe\\x00b\\xc3'; printf '\\x00\\xc0\\x80' >&2", nil, anyOK},
		{"output past the caps on both streams", "python", "import sys\nfor i in range(20000):\n    sys.stdout.write('o' * 100 + '\\n')\n    sys.stderr.write('\\x00\\xff' * 50 + '\\n')", nil, kindIs(contract.KindOutputLimit)},
		{"fill /tmp", "python", "import os\ni = 0\nwhile True:\n    open(f'/tmp/f{i}', 'wb').write(b'x' * (1 << 20))\n    i += 1", nil, kindIs(contract.KindResourceLimit)},
		// gVisor's tmpfs has no inode cap: the loop runs to its deadline.
		{"fill the inodes", "python", "import os\ni = 0\nwhile True:\n    open(f'/tmp/f{i}', 'wb').close()\n    i += 1", []any{"timeout_seconds", 10},
			kindIs(contract.KindResourceLimit, contract.KindTimeout)},
		{"stop every process", "bash", "kill -STOP -1 2>/dev/null; kill -CONT -1 2>/dev/null; echo done", nil, stdoutIs("done\n")},
		{"kill every process", "bash", "kill -9 -1 2>/dev/null; echo done", nil, stdoutIs("done\n")},
		{"forge the end of a report", "bash", "printf '\\x1erbx00000000000000000000000000000000\\x1e0\\x1e{\"exit_code\":0}\\n'; printf '\\x1erbx\\x1e0\\x1e' >&2; echo real", nil, anyOK},
	}
}

func TestHostileInit(t *testing.T) {
	for _, b := range initBackends {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, hostileLimits)
			for _, c := range hostileRuns() {
				t.Run(c.name, func(t *testing.T) {
					if hole := gvisorHoles[c.name]; b.name == "gvisor" && hole != "" {
						t.Skipf("KNOWN HOLE under gVisor, not closed yet: %s", hole)
					}
					args := map[string]any{"language": c.lang, "code": c.code}
					for i := 0; i+1 < len(c.args); i += 2 {
						args[c.args[i].(string)] = c.args[i+1]
					}
					r, _ := s.call(t, args)
					notSandboxNorEscape(t, r)
					if c.want != nil {
						c.want(t, r)
					}
					nextAnswers(t, s)
				})
			}
		})
	}
}

// hostileSession is a session attacked by its own cells: after the cells
// (each may end as it will, never as sandbox), the probe cell must answer
// as probe says, or the session must say it is lost, and a new session
// must work.
type hostileSession struct {
	name, lang string
	cells      []string
	// probe is a cell run after the attack and its stdout; "" for a
	// session the attack may lose.
	probe, want string
}

func hostileSessions() []hostileSession {
	return []hostileSession{
		{"a thread left running prints", "python",
			[]string{"import sys, threading, time\nkept = 1\ndef tick():\n    while True:\n        sys.stderr.write('tick\\n')\n        time.sleep(0.01)\nthreading.Thread(target=tick, daemon=True).start()"},
			"print('probe', kept)", "probe 1"},
		{"processes left in the background", "bash",
			[]string{"kept=1; sleep 300 & (while :; do echo tick >&2; sleep 0.01; done) & disown -a; true"},
			"echo probe $kept", "probe 1"},
		{"a daemonized process holds the session's output", "python",
			[]string{"import subprocess\nkept = 1\nsubprocess.Popen(['setsid', 'sh', '-c', 'while :; do echo tick >&2; sleep 0.01; done'], start_new_session=True)"},
			"print('probe', kept)", "probe 1"},
		{"the interpreter exits", "python", []string{"import os\nos._exit(3)"}, "", ""},
		{"the shell exits", "bash", []string{"exit 4"}, "", ""},
		{"the interpreter closes its request pipe", "python", []string{"import os\nos.close(4)"}, "", ""},
		{"sys.exit is a status, not an exit", "python", []string{"kept = 1", "import sys\nsys.exit(7)"}, "print('probe', kept)", "probe 1"},
		{"replaced builtins and modules", "python",
			[]string{"import builtins, json, os, sys\nkept = 1\njson.loads = None\nos.write = None\nos.dup2 = None\nos.pipe = None\nbuiltins.open = None\nsys.stdout.flush = None"},
			"import sys\nsys.__stdout__.write('probe %d\\n' % kept)", "probe 1"},
		{"replaced shell builtins", "bash",
			[]string{"kept=1; printf() { :; }; read() { :; }; source() { :; }; echo() { :; }"},
			"command echo probe $kept", "probe 1"},
		{"replaced JavaScript globals", "javascript",
			[]string{"globalThis.kept = 1\nJSON.parse = null\nrequire('fs').writeSync = null\nprocess.exit = null"},
			"console.log('probe', kept)", "probe 1"},
		{"a forged end marker", "python",
			[]string{"import sys\nkept = 1\nsys.stdout.write('\\x1erbx' + '0' * 32 + '\\x1e')\nsys.stderr.write('\\x1erbx' + '0' * 32 + '\\x1e0\\x1e')"},
			"print('probe', kept)", "probe 1"},
		{"a cell reads the next request", "python", []string{"import os\nos.read(4, 1 << 20)"}, "", ""},
		{"a fork storm left running", "bash",
			[]string{"kept=1; for i in $(seq 1 40); do sleep 300 & done 2>/dev/null; true"},
			"echo probe $kept", "probe 1"},
		{"huge lines, NUL bytes and invalid UTF-8", "python",
			[]string{"import sys\nkept = 1\nsys.stdout.buffer.write(b'\\x00\\xff\\xfe' * 3000000)\nsys.stderr.buffer.write(b'\\xc3' * 3000000)"},
			"print('probe', kept)", "probe 1"},
	}
}

func TestHostileSessions(t *testing.T) {
	for _, b := range initBackends {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, hostileLimits)
			for _, c := range hostileSessions() {
				t.Run(c.name, func(t *testing.T) {
					id := s.open(t, c.lang)
					defer s.tool(t, "session_close", map[string]any{"session_id": id})
					for _, cell := range c.cells {
						r := s.in(t, id, c.lang, cell, "timeout_seconds", 10)
						notSandboxNorEscape(t, r)
					}
					if c.probe != "" {
						r := s.in(t, id, c.lang, c.probe)
						notSandboxNorEscape(t, r)
						if r.Status != contract.StatusOK || !strings.Contains(r.Stdout, c.want) || r.Session == nil || r.Session.State != contract.SessionAlive {
							t.Fatalf("the probe: %s %+v %+v\nstdout: %.500s\nstderr: %.500s", r.Status, r.Error, r.Session, r.Stdout, r.Stderr)
						}
					} else {
						// Lost or not, the next cell answers, never as sandbox.
						r := s.in(t, id, c.lang, map[string]string{"python": "print(1)", "bash": "echo 1", "javascript": "console.log(1)"}[c.lang])
						notSandboxNorEscape(t, r)
						// An error says the session is lost: this call's own
						// kind with session.state lost, or session_lost.
						lost := r.Session != nil && r.Session.State == contract.SessionLost
						if r.Status != contract.StatusOK && !lost && (r.Error == nil || r.Error.Kind != contract.KindSessionLost) {
							t.Fatalf("after the attack: %s %+v %+v", r.Status, r.Error, r.Session)
						}
					}
					nextAnswers(t, s)
				})
			}
			t.Run("an interrupt storm", func(t *testing.T) {
				id := s.open(t, "python")
				mustOK(t, s.in(t, id, "python", "kept = 'yes'"))
				for i := 0; i < 12; i++ {
					// Some land before the cell starts, some during it.
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(50+i*100)*time.Millisecond)
					_, _ = s.c.CallTool(ctx, newCall(map[string]any{"language": "python", "code": "while True:\n    pass\n", "session_id": id}))
					cancel()
				}
				r := s.in(t, id, "python", "print(kept)")
				notSandboxNorEscape(t, r)
				if r.Status != contract.StatusOK || r.Stdout != "yes\n" {
					t.Fatalf("after the storm: %s %+v %q %q", r.Status, r.Error, r.Stdout, r.Stderr)
				}
				s.tool(t, "session_close", map[string]any{"session_id": id})
				nextAnswers(t, s)
			})
			if left := s.waitNoSessionBoxes(t); len(left) > 0 {
				t.Fatalf("sessions left boxes: %v", left)
			}
		})
	}
}
