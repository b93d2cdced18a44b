package sandbox

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestClassify(t *testing.T) {
	m := manifest.Default()
	py, _ := m.Language("python")
	sh, _ := m.Language("bash")
	job := contract.Job{Language: py, Timeout: 30 * time.Second, Code: "x = 1\nprint(1/0)\n"}
	tb := "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 2, in <module>\n    print(1/0)\n          ~^~\nZeroDivisionError: division by zero\n"
	cases := []struct {
		name     string
		job      contract.Job
		o        outcome
		kind     contract.Kind
		limit    contract.Limit
		contains string
	}{
		{"ok", job, outcome{report: &initproto.Report{}}, "", "", ""},
		{"oom from the engine beats exit 0", job, outcome{report: &initproto.Report{}, oomKilled: true}, contract.KindOOM, contract.LimitMemory, "512MiB"},
		{"oom from the cgroup counter", job, outcome{report: &initproto.Report{OOMKills: 1, ExitCode: 137, Signal: 9}}, contract.KindOOM, contract.LimitMemory, ""},
		{"oom without a report", job, outcome{oomKilled: true, lost: loss{why: "stream cut"}}, contract.KindOOM, contract.LimitMemory, ""},
		{"no report", job, outcome{lost: loss{why: "the box ended without a report"}}, contract.KindSandbox, "", "without a report"},
		{"init error", job, outcome{report: &initproto.Report{InitError: "writing x: no space"}}, contract.KindSandbox, "", "runbox-init: writing x"},
		{"interpreter missing", job, outcome{report: &initproto.Report{StartError: "python3: command not found in the box"}}, contract.KindSandbox, "", "command not found"},
		{"timeout", job, outcome{report: &initproto.Report{TimedOut: true, Signal: 9, ExitCode: 137}}, contract.KindTimeout, contract.LimitWallTime, "30s"},
		{"backstop", job, outcome{end: backstopped}, contract.KindTimeout, contract.LimitWallTime, ""},
		{"runtime", job, outcome{report: &initproto.Report{ExitCode: 1, Stderr: []byte(tb)}}, contract.KindRuntime, "", "division by zero"},
		{"pids", job, outcome{report: &initproto.Report{ExitCode: 1, PidsLimitHit: true, Stderr: []byte(tb)}}, contract.KindResourceLimit, contract.LimitPids, "128 processes"},
		{"disk", job, outcome{report: &initproto.Report{ExitCode: 1, DiskFull: "/workspace"}}, contract.KindResourceLimit, contract.LimitDisk, "64MiB"},
		{"fsize", job, outcome{report: &initproto.Report{ExitCode: 153, Signal: int(syscall.SIGXFSZ)}}, contract.KindResourceLimit, contract.LimitDisk, ""},
		{"open files from stderr", job, outcome{report: &initproto.Report{ExitCode: 1, Stderr: []byte("OSError: [Errno 24] Too many open files: 'x'\n")}}, contract.KindResourceLimit, contract.LimitOpenFiles, ""},
		{"cpu", job, outcome{report: &initproto.Report{ExitCode: 152, Signal: int(syscall.SIGXCPU)}}, contract.KindResourceLimit, contract.LimitCPUTime, ""},
		{"seccomp kill, named", job, outcome{report: &initproto.Report{ExitCode: 159, Signal: int(syscall.SIGSYS)}, syscall: "ptrace"}, contract.KindForbiddenSyscall, "", "calling ptrace"},
		{"seccomp kill, unnamed", job, outcome{report: &initproto.Report{ExitCode: 159, Signal: int(syscall.SIGSYS)}}, contract.KindForbiddenSyscall, "", "forbidden system call"},
		{"a shell's child killed by seccomp", contract.Job{Language: sh, Timeout: time.Second}, outcome{report: &initproto.Report{ExitCode: 159, Stderr: []byte("/workspace/main.sh: line 2:    12 Bad system call         unshare -r true\n")}}, contract.KindForbiddenSyscall, "", ""},
		{"exit 159 alone is not seccomp", contract.Job{Language: sh, Timeout: time.Second}, outcome{report: &initproto.Report{ExitCode: 159}}, contract.KindRuntime, "", ""},
		{"signal", job, outcome{report: &initproto.Report{ExitCode: 139, Signal: int(syscall.SIGSEGV)}}, contract.KindRuntime, "", "SIGSEGV"},
		{"int 0x80 without the 32-bit ABI", job, outcome{report: &initproto.Report{ExitCode: 139, Signal: int(syscall.SIGSEGV)}, syscall: "int 0x80 (the 32-bit ABI, which this host's kernel has turned off)"}, contract.KindForbiddenSyscall, "", "turned off"},
		{"plain exit", job, outcome{report: &initproto.Report{ExitCode: 3, Stderr: []byte("first\nlast words\n")}}, contract.KindRuntime, "", "exited with status 3: last words"},
		{"output cut on success", job, outcome{report: &initproto.Report{StdoutTruncated: true, StdoutBytes: 1 << 22}}, contract.KindOutputLimit, "", "4194304 bytes"},
		{"runtime beats output cut", job, outcome{report: &initproto.Report{ExitCode: 1, StdoutTruncated: true, Stderr: []byte(tb)}}, contract.KindRuntime, "", ""},
		{"bash check failed", contract.Job{Language: sh, Code: "if\n"}, outcome{report: &initproto.Report{CheckFailed: true, ExitCode: 2,
			Stderr: []byte("/workspace/main.sh: line 2: syntax error: unexpected end of file\n")}}, contract.KindSyntax, "", "unexpected end of file"},
	}
	for _, tc := range cases {
		info := classify(tc.job, m.Limits, tc.o)
		if tc.kind == "" {
			if info != nil {
				t.Errorf("%s: got %+v, want ok", tc.name, info)
			}
			continue
		}
		if info == nil || info.Kind != tc.kind || info.Limit != tc.limit || !strings.Contains(info.Message, tc.contains) || info.Hint == "" {
			t.Errorf("%s: got %+v, want %s/%s containing %q", tc.name, info, tc.kind, tc.limit, tc.contains)
		}
	}
}

func TestClassifyRuntimeCarriesTheLanguagesWords(t *testing.T) {
	m := manifest.Default()
	py, _ := m.Language("python")
	tb := "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 2, in <module>\n    print(1/0)\n          ~^~\nZeroDivisionError: division by zero\n"
	info := classify(contract.Job{Language: py, Code: "x = 1\nprint(1/0)\n"}, m.Limits, outcome{report: &initproto.Report{ExitCode: 1, Stderr: []byte(tb)}})
	if info.Type != "ZeroDivisionError" || info.Message != "division by zero" || info.Line != 2 || !strings.Contains(info.Hint, "line 2") {
		t.Fatalf("got %+v", info)
	}
}

func TestTimeoutHintOffersMoreOnlyBelowMax(t *testing.T) {
	m := manifest.Default()
	below := timeoutError(contract.Job{Timeout: time.Second}, m.Limits)
	atMax := timeoutError(contract.Job{Timeout: m.Limits.MaxTimeout()}, m.Limits)
	if !strings.Contains(below.Hint, "timeout_seconds") || strings.Contains(atMax.Hint, "timeout_seconds") {
		t.Fatalf("below: %q\nat max: %q", below.Hint, atMax.Hint)
	}
}

func TestNeedsVerdict(t *testing.T) {
	clean := &initproto.Report{OOMKills: 0}
	for name, tc := range map[string]struct {
		o    outcome
		want bool
	}{
		"clean run: the box's counter says no OOM": {outcome{report: clean}, false},
		"timeout kill is explained":                {outcome{report: &initproto.Report{TimedOut: true, Signal: 9}}, false},
		"no report":                                {outcome{}, true},
		"no counter (gVisor), a clean exit":        {outcome{report: &initproto.Report{OOMKills: -1}}, false},
		"no counter (gVisor), exit status 1":       {outcome{report: &initproto.Report{OOMKills: -1, ExitCode: 1}}, true},
		"no counter (gVisor), a child killed":      {outcome{report: &initproto.Report{OOMKills: -1, ExitCode: 137}}, true},
		"no counter (gVisor), a signal":            {outcome{report: &initproto.Report{OOMKills: -1, Signal: 6}}, true},
		"no counter (gVisor), timed out":           {outcome{report: &initproto.Report{OOMKills: -1, TimedOut: true, Signal: 9}}, true},
		"no counter (gVisor), could not start":     {outcome{report: &initproto.Report{OOMKills: -1, StartError: "x"}}, true},
		"counter says OOM":                         {outcome{report: &initproto.Report{OOMKills: 1}}, true},
		"an unexplained SIGKILL":                   {outcome{report: &initproto.Report{Signal: 9}}, true},
		"backstop":                                 {outcome{report: clean, end: backstopped}, true},
	} {
		if got := needsVerdict(tc.o); got != tc.want {
			t.Errorf("%s: got %v", name, got)
		}
	}
}

// Signals are Linux's numbers whatever the server's OS.
func TestSignalName(t *testing.T) {
	for n, want := range map[int]string{9: "SIGKILL", 11: "SIGSEGV", 31: "SIGSYS", 24: "SIGXCPU", 64: "signal 64", 0: "signal 0"} {
		if got := signalName(n); got != want {
			t.Errorf("signalName(%d) = %q, want %q", n, got, want)
		}
	}
	if sigSYS != int(syscall.SIGSYS) || sigXCPU != int(syscall.SIGXCPU) || sigXFSZ != int(syscall.SIGXFSZ) || sigKILL != int(syscall.SIGKILL) {
		t.Error("the constants are not this Linux's numbers")
	}
}

// The kernel names a process after its executable's file, cut to 15
// bytes: a forbidden call's record must carry the program's name to be
// its own.
func TestKernelComm(t *testing.T) {
	for argv, want := range map[string]string{"python3": "python3", "/usr/bin/node": "node", "bash": "bash", "/x/a-very-long-program-name": "a-very-long-pro"} {
		if got := kernelComm([]string{argv, "-c"}); got != want {
			t.Errorf("kernelComm(%q) = %q, want %q", argv, got, want)
		}
	}
	if kernelComm(nil) != "" {
		t.Error("no argv, no name")
	}
}

// A call's ending only moves forward: an interrupted session's call may
// still reach its deadline, never the reverse.
func TestEndingMovesForward(t *testing.T) {
	var o outcome
	for _, step := range []struct{ to, want ending }{
		{interrupted, interrupted}, {backstopped, backstopped}, {interrupted, backstopped}, {answered, backstopped},
	} {
		o.endTo(step.to)
		if o.end != step.want {
			t.Fatalf("endTo(%d): %d, want %d", step.to, o.end, step.want)
		}
	}
}
