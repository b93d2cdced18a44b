package contract

import (
	"fmt"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// Every sentence an agent reads about a run is made here, so they can be
// reviewed together: each error's message says what happened, its hint the
// one thing to do next.

// sandboxHint is the hint of a failure of the sandbox, not of the code.
const sandboxHint = "The sandbox failed, not your code: retry once; if it persists, the operator should run `runbox doctor`."

// Invalid is the error of a request that never reaches a box.
func Invalid(format string, a ...any) ErrorInfo {
	return ErrorInfo{Kind: KindInvalidRequest, Message: fmt.Sprintf(format, a...),
		Hint: "Fix the arguments as the message says and call run_code again; nothing was run."}
}

// Busy refuses a call past the queue.
func Busy(concurrency, queue int) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitBusy,
		Message: fmt.Sprintf("the server is busy: %d runs are in progress and %d waiting", concurrency, queue),
		Hint:    "Wait a few seconds and retry; do not start many runs at once."}
}

// Cancelled ends a call the client cancelled.
func Cancelled() ErrorInfo {
	return ErrorInfo{Kind: KindSandbox, Message: "the call was cancelled before the run finished",
		Hint: "The client cancelled the call; run it again if you still need the result."}
}

// BudgetRunTime refuses a session that used its run time.
func BudgetRunTime(seconds float64) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitBudget,
		Message: fmt.Sprintf("this session has used its %g seconds of run time", seconds),
		Hint:    "Stop retrying: report what you have to the user, or ask them to start a new session."}
}

// BudgetRate refuses a session that started its runs for this minute.
func BudgetRate(runs int, wait time.Duration) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitBudget,
		Message: fmt.Sprintf("this session has started %d runs in the last minute, the most allowed", runs),
		Hint:    fmt.Sprintf("Wait %.0f seconds before the next run, and make each run do more.", wait.Seconds()+1)}
}

// SandboxFailed is a run the sandbox lost (no report, a broken channel).
func SandboxFailed(msg string) ErrorInfo {
	return ErrorInfo{Kind: KindSandbox, Message: FirstLine(msg), Hint: sandboxHint}
}

// RunLost is a run whose result a restarted server could not get back:
// why says what was found (its box gone, a record of another backend).
func RunLost(why string) ErrorInfo {
	return ErrorInfo{Kind: KindSandbox, Message: "the run's result is lost: " + FirstLine(why),
		Hint: "The server restarted while the run was going and could not get its result back: run it again."}
}

// BoxTakenAway is a run whose box the platform deleted or evicted.
func BoxTakenAway(msg string) ErrorInfo {
	return ErrorInfo{Kind: KindSandbox, Message: FirstLine(msg),
		Hint: "The cluster deleted or evicted the sandbox box, not because of your code: run it again."}
}

// InterpreterMissing is a language whose interpreter did not start.
func InterpreterMissing(msg, language, image string) ErrorInfo {
	return ErrorInfo{Kind: KindSandbox, Message: FirstLine(msg),
		Hint: fmt.Sprintf("The %s interpreter could not start in image %s: the operator should check the manifest's command for it and run `runbox doctor`.", language, image)}
}

// OOM is a program killed for its memory.
func OOM(memory manifest.ByteSize) ErrorInfo {
	return ErrorInfo{Kind: KindOOM, Limit: LimitMemory,
		Message: fmt.Sprintf("the program was killed for using more than the %s memory limit", memory),
		Hint:    fmt.Sprintf("Use less memory than %s: process data in chunks or streams, use smaller dtypes, and free large objects you no longer need.", memory)}
}

// Timeout is a program killed at its deadline; more says how long a call
// may ask for when this one asked for less.
func Timeout(timeout time.Duration, more float64) ErrorInfo {
	hint := "Make the code faster or do less per call (smaller input, fewer iterations), and avoid waiting on input that never comes."
	if more > 0 {
		hint = fmt.Sprintf("Make the code faster or do less per call, or ask for a longer timeout_seconds (at most %g).", more)
	}
	return ErrorInfo{Kind: KindTimeout, Limit: LimitWallTime,
		Message: fmt.Sprintf("the program did not finish within %s and was killed", timeout), Hint: hint}
}

// CPUTime is a program killed for its CPU time.
func CPUTime(seconds int64) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitCPUTime,
		Message: fmt.Sprintf("the program used more than its %d s of CPU time and was killed", seconds),
		Hint:    "Do less work per call: a faster algorithm, less data, or fewer iterations."}
}

// Resource is a program stopped by a process, disk or open-file limit.
func Resource(limit Limit, l manifest.Limits) ErrorInfo {
	info := ErrorInfo{Kind: KindResourceLimit, Limit: limit}
	switch limit {
	case LimitPids:
		info.Message = fmt.Sprintf("the program tried to run more than %d processes or threads", l.Pids)
		info.Hint = "Start fewer processes or threads: use a small fixed pool, and never fork in a loop."
	case LimitDisk:
		info.Message = fmt.Sprintf("the program filled its disk space (/workspace %s, /tmp %s)", l.WorkspaceBytes, l.TmpBytes)
		info.Hint = "Write less: stream or aggregate data instead of storing it, and delete temporary files."
	case LimitOpenFiles:
		info.Message = fmt.Sprintf("the program opened more than %d files at once", l.OpenFiles)
		info.Hint = "Close each file when you are done with it instead of keeping them all open."
	}
	return info
}

// Forbidden is a program the seccomp filter killed; name is the call,
// when known.
func Forbidden(name string) ErrorInfo {
	info := ErrorInfo{Kind: KindForbiddenSyscall, Syscall: name,
		Message: "the program was killed by the sandbox for a forbidden system call",
		Hint:    "The sandbox kills programs that " + forbiddenPurposes() + ", or use the 32-bit ABI. Do the work without it: no debuggers, tracers or container tricks; plain file and socket I/O."}
	if name != "" {
		info.Message = fmt.Sprintf("the program was killed by the sandbox for calling %s, which is forbidden", name)
	}
	return info
}

// Language is the interpreter's own error, of kind syntax or runtime.
func Language(kind Kind, typ, message string, line, column int) ErrorInfo {
	info := ErrorInfo{Kind: kind, Type: typ, Message: FirstLine(message), Line: line, Column: column}
	where := ""
	if line > 0 {
		where = fmt.Sprintf(" on line %d", line)
	}
	if kind == KindSyntax {
		info.Hint = fmt.Sprintf("Fix the syntax error%s; the code did not run.", where)
	} else {
		name := typ
		if name == "" {
			name = "the error"
		}
		info.Hint = fmt.Sprintf("Fix %s raised%s and run again.", name, where)
	}
	if info.Message == "" {
		info.Message = strings.TrimSpace(typ)
	}
	return info
}

// KilledBySignal is a program that died of a signal nothing explains.
func KilledBySignal(name string) ErrorInfo {
	return ErrorInfo{Kind: KindRuntime, Type: name,
		Message: fmt.Sprintf("the program was killed by signal %s", name),
		Hint:    "The process crashed or was killed by a signal; read stderr and simplify the failing step."}
}

// Exited is a program that exited non-zero with no error its language
// names; lastLine is its stderr's last line.
func Exited(code int, lastLine string) ErrorInfo {
	msg := fmt.Sprintf("exited with status %d", code)
	if lastLine != "" {
		msg += ": " + lastLine
	}
	return ErrorInfo{Kind: KindRuntime, Message: msg,
		Hint: "The program exited with a non-zero status; read stderr for the cause, fix it, and run again."}
}

// OutputCut is a run that succeeded but printed more than was kept.
func OutputCut(stdoutBytes, stderrBytes int64, kept manifest.ByteSize) ErrorInfo {
	return ErrorInfo{Kind: KindOutputLimit,
		Message: fmt.Sprintf("the program wrote %d bytes to stdout and %d to stderr; only the first and last %s of each were kept", stdoutBytes, stderrBytes, kept),
		Hint:    "Print a summary instead of everything, or write large output to a file in /workspace to get it back as an artifact."}
}

// BackgroundFull refuses a run that outlasted the call's wait (or a call
// made as a task) when its client, or the server, holds all the long runs
// the manifest allows.
func BackgroundFull(cap int, perClient bool) ErrorInfo {
	who, field := "the server holds", "limits.max_background_runs"
	if perClient {
		who, field = "you hold", "limits.max_background_runs_per_client"
	}
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitBackgroundRuns,
		Message: fmt.Sprintf("%s %d long runs, the most allowed (%s): this run was stopped", who, cap, field),
		Hint:    "Collect your runs with run_wait or stop one with run_cancel, then run this again; or make it shorter."}
}

// UnknownRun answers run_wait or run_cancel for a run id the caller holds
// no run of: never said apart from another client's run.
func UnknownRun(runID string) ErrorInfo {
	return ErrorInfo{Kind: KindInvalidRequest, Message: fmt.Sprintf("no run %q of yours is held: unknown, another client's, or its result expired", runID),
		Hint: "Use the run_id a run_code answer with status running gave you; a run's result is kept for a while after it ends, then dropped."}
}

// StillRunning is the handle of a run that goes on after its call
// answered, its output so far not known (OutputSoFar says it when it is).
func StillRunning(elapsed time.Duration, waitTool string) *Running {
	return &Running{ElapsedMs: elapsed.Milliseconds(),
		Output: "not known at this moment (the sandbox is starting, ending, or did not answer in time): the whole output comes with the result",
		Next:   fmt.Sprintf("call %s with this run_id to wait for the result (it answers running again if the run is still going); run_cancel stops it", waitTool)}
}

// OutputSoFar is Running.Output when the answer shows the output so far:
// the bytes written to each stream until now.
func OutputSoFar(stdout, stderr int64) string {
	return fmt.Sprintf("so far: %d bytes of stdout and %d of stderr, shown in stdout and stderr (their head and tail where cut); the whole output comes with the result", stdout, stderr)
}
