package sandbox

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// outcome is everything known once a box has ended.
type outcome struct {
	report *initproto.Report // nil when none arrived
	// oomKilled is the engine's word that the box's memory cgroup killed
	// a process; exit codes never decide OOM.
	oomKilled bool
	// backstop: the server killed the box because runbox-init did not
	// end the run by its deadline.
	backstop bool
	// lost explains why no report arrived (engine error, stream cut).
	lost string
	// syscall names the call the seccomp filter killed the program for,
	// when the kernel log told.
	syscall string
}

// classify turns an outcome into the contract's typed error; nil means ok.
func classify(job contract.Job, lim manifest.Limits, o outcome) *contract.ErrorInfo {
	rep := o.report
	if o.oomKilled || (rep != nil && rep.OOMKills > 0) {
		return &contract.ErrorInfo{
			Kind: contract.KindOOM, Limit: contract.LimitMemory,
			Message: fmt.Sprintf("the program was killed for using more than the %s memory limit", lim.Memory),
			Hint:    fmt.Sprintf("Use less memory than %s: process data in chunks or streams, use smaller dtypes, and free large objects you no longer need.", lim.Memory),
		}
	}
	if rep == nil || rep.InitError != "" {
		if o.backstop {
			return timeoutError(job, lim)
		}
		msg := o.lost
		if rep != nil {
			msg = "runbox-init: " + rep.InitError
		}
		return &contract.ErrorInfo{Kind: contract.KindSandbox, Message: oneLine(msg),
			Hint: "The sandbox failed, not your code: retry once; if it persists, the operator should run `runbox doctor`."}
	}
	if rep.StartError != "" {
		return &contract.ErrorInfo{Kind: contract.KindSandbox, Message: oneLine(rep.StartError),
			Hint: fmt.Sprintf("The %s interpreter could not start in image %s: the operator should check the manifest's command for it and run `runbox doctor`.", job.Language.Name, job.Language.Image)}
	}
	if rep.TimedOut || o.backstop {
		return timeoutError(job, lim)
	}
	stderr := string(rep.Stderr)
	codePath := manifest.Workspace + "/" + job.Language.File
	le, parsed := ParseLangError(job.Language.ErrorFormat, stderr, codePath, job.Code)
	if rep.CheckFailed {
		if !parsed {
			le = LangError{Kind: contract.KindSyntax, Message: lastLine(stderr)}
		}
		return langError(contract.KindSyntax, le)
	}
	if sig := rep.Signal; sig == sigXCPU || (sig == sigKILL && lim.CPUSeconds > 0 && rep.CPUMs >= lim.CPUSeconds*1000) {
		return &contract.ErrorInfo{Kind: contract.KindResourceLimit, Limit: contract.LimitCPUTime,
			Message: fmt.Sprintf("the program used more than its %d s of CPU time and was killed", lim.CPUSeconds),
			Hint:    "Do less work per call: a faster algorithm, less data, or fewer iterations."}
	}
	if seccompDeath(rep) {
		return forbiddenError(o.syscall)
	}
	if rep.ExitCode != 0 {
		if parsed && le.Kind == contract.KindSyntax {
			return langError(contract.KindSyntax, le)
		}
		if limit := resourceLimit(rep, stderr); limit != "" {
			info := resourceError(limit, lim)
			if parsed {
				info.Type, info.Line, info.Column = le.Type, le.Line, le.Column
			}
			return info
		}
		if parsed {
			return langError(contract.KindRuntime, le)
		}
		if rep.Signal != 0 {
			name := signalName(rep.Signal)
			return &contract.ErrorInfo{Kind: contract.KindRuntime, Type: name,
				Message: fmt.Sprintf("the program was killed by signal %s", name),
				Hint:    "The process crashed or was killed by a signal; read stderr and simplify the failing step."}
		}
		return &contract.ErrorInfo{Kind: contract.KindRuntime,
			Message: exitMessage(rep.ExitCode, stderr),
			Hint:    "The program exited with a non-zero status; read stderr for the cause, fix it, and run again."}
	}
	if rep.StdoutTruncated || rep.StderrTruncated {
		return &contract.ErrorInfo{Kind: contract.KindOutputLimit,
			Message: fmt.Sprintf("the program wrote %d bytes to stdout and %d to stderr; only the first and last %s of each were kept", rep.StdoutBytes, rep.StderrBytes, lim.OutputBytes),
			Hint:    "Print a summary instead of everything, or write large output to a file in /workspace to get it back as an artifact."}
	}
	return nil
}

// seccompDeath says whether the program, or a command a shell script ran,
// was killed by the seccomp filter (SIGSYS). A shell reports its child's
// death as "Bad system call" and status 128+31.
func seccompDeath(rep *initproto.Report) bool {
	if rep.Signal == sigSYS {
		return true
	}
	return rep.ExitCode == 128+sigSYS && bytes.Contains(rep.Stderr, []byte("Bad system call"))
}

func forbiddenError(name string) *contract.ErrorInfo {
	info := &contract.ErrorInfo{Kind: contract.KindForbiddenSyscall, Syscall: name,
		Message: "the program was killed by the sandbox for a forbidden system call",
		Hint: "The sandbox kills programs that debug or trace processes (ptrace), mount or unshare namespaces, load kernel modules or BPF, use perf, kernel keyrings, userfaultfd or io_uring, or use the 32-bit ABI. " +
			"Do the work without it: no debuggers, tracers or container tricks; plain file and socket I/O."}
	if name != "" {
		info.Message = fmt.Sprintf("the program was killed by the sandbox for calling %s, which is forbidden", name)
	}
	return info
}

func timeoutError(job contract.Job, lim manifest.Limits) *contract.ErrorInfo {
	hint := "Make the code faster or do less per call (smaller input, fewer iterations), and avoid waiting on input that never comes."
	if job.Timeout < lim.MaxTimeout() {
		hint = fmt.Sprintf("Make the code faster or do less per call, or ask for a longer timeout_seconds (at most %g).", lim.MaxTimeoutSeconds)
	}
	return &contract.ErrorInfo{Kind: contract.KindTimeout, Limit: contract.LimitWallTime,
		Message: fmt.Sprintf("the program did not finish within %s and was killed", job.Timeout),
		Hint:    hint}
}

// resourceLimit names the limit a failed run hit, from what the box
// measured first and the program's own complaint second.
func resourceLimit(rep *initproto.Report, stderr string) contract.Limit {
	switch {
	case rep.PidsLimitHit:
		return contract.LimitPids
	case rep.DiskFull != "":
		return contract.LimitDisk
	case rep.Signal == sigXFSZ:
		return contract.LimitDisk
	}
	return ResourceHint(stderr)
}

func resourceError(limit contract.Limit, lim manifest.Limits) *contract.ErrorInfo {
	info := &contract.ErrorInfo{Kind: contract.KindResourceLimit, Limit: limit}
	switch limit {
	case contract.LimitPids:
		info.Message = fmt.Sprintf("the program tried to run more than %d processes or threads", lim.Pids)
		info.Hint = "Start fewer processes or threads: use a small fixed pool, and never fork in a loop."
	case contract.LimitDisk:
		info.Message = fmt.Sprintf("the program filled its disk space (/workspace %s, /tmp %s)", lim.WorkspaceBytes, lim.TmpBytes)
		info.Hint = "Write less: stream or aggregate data instead of storing it, and delete temporary files."
	case contract.LimitOpenFiles:
		info.Message = fmt.Sprintf("the program opened more than %d files at once", lim.OpenFiles)
		info.Hint = "Close each file when you are done with it instead of keeping them all open."
	}
	return info
}

func langError(kind contract.Kind, le LangError) *contract.ErrorInfo {
	info := &contract.ErrorInfo{Kind: kind, Type: le.Type, Message: oneLine(le.Message), Line: le.Line, Column: le.Column}
	where := ""
	if le.Line > 0 {
		where = fmt.Sprintf(" on line %d", le.Line)
	}
	if kind == contract.KindSyntax {
		info.Hint = fmt.Sprintf("Fix the syntax error%s; the code did not run.", where)
	} else {
		name := le.Type
		if name == "" {
			name = "the error"
		}
		info.Hint = fmt.Sprintf("Fix %s raised%s and run again.", name, where)
	}
	if info.Message == "" {
		info.Message = strings.TrimSpace(le.Type)
	}
	return info
}

func exitMessage(code int, stderr string) string {
	if l := lastLine(stderr); l != "" {
		return fmt.Sprintf("exited with status %d: %s", code, l)
	}
	return fmt.Sprintf("exited with status %d", code)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n\r\t ")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return oneLine(s)
}

// oneLine keeps the first line, valid UTF-8, at most 500 bytes.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > 500 {
		s = s[:500]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// text turns captured bytes into valid UTF-8 for the result.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}
