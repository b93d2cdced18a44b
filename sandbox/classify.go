package sandbox

import (
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/langerr"
	"github.com/runbox-mcp/runbox/manifest"
)

// outcome is everything known once a box has ended.
type outcome struct {
	report   *initproto.Report // nil when none arrived
	contents [][]byte          // the sent artifacts' content, in the report's order
	// end is how the host ended the call (endTo moves it).
	end ending
	// lost says why no report is believed; zero when one is.
	lost loss
	// oomKilled is the platform's word that the box's memory cgroup killed
	// a process; exit codes never decide OOM.
	oomKilled bool
	// session is what a session box's report said of its state (nil for
	// a one-off box, or when no report came).
	session *initproto.SessionState
	// syscall names the call the seccomp filter killed the program for,
	// when the kernel log told.
	syscall string
	// program is the kernel's name (comm) of the program the box ran.
	program string
}

// ending is how the host ended a call. A call's ending only moves forward
// (endTo): a session's interrupted call may still reach its deadline.
type ending int

const (
	// answered: the host ended nothing; the box answered, or its channel
	// ended of itself.
	answered ending = iota
	// interrupted: a session's call was cancelled and its cell
	// interrupted; the box lives on.
	interrupted
	// cancelled: the call was cancelled and the box killed.
	cancelled
	// backstopped: the server killed the box because runbox-init did not
	// end the run by its deadline.
	backstopped
)

// endTo moves the call's ending to e, unless it has already moved past it.
func (o *outcome) endTo(e ending) {
	if e > o.end {
		o.end = e
	}
}

// loss is why a call has no report to believe: a cause and the sentence
// that says it. It is independent of the call's ending: a box killed at
// its deadline may also have broken the channel protocol.
type loss struct {
	cause lossCause
	why   string
}

// lossCause is what took a call's report.
type lossCause int

const (
	// lossNoReport: the channel or the engine failed, or the box ended
	// without a report.
	lossNoReport lossCause = iota
	// lossViolation: the box broke the channel protocol and was killed;
	// what it sent is not believed.
	lossViolation
	// lossGone: the platform took the box away.
	lossGone
)

// classify turns an outcome into the contract's typed error; nil means ok.
func classify(job contract.Job, lim manifest.Limits, o outcome) *contract.ErrorInfo {
	info := classifyKind(job, lim, o)
	if info != nil && info.Kind == contract.KindSandbox && o.lost.cause == lossGone {
		gone := contract.BoxTakenAway(info.Message)
		info = &gone
	}
	return info
}

func classifyKind(job contract.Job, lim manifest.Limits, o outcome) *contract.ErrorInfo {
	rep := o.report
	stderr := ""
	if rep != nil {
		stderr = string(rep.Stderr)
	}
	if o.oomKilled || (rep != nil && rep.OOMKills > 0) || (rep != nil && rep.ExitCode != 0 && langerr.HeapExhausted(job.Language.ErrorFormat, stderr)) {
		return ptr(contract.OOM(lim.Memory))
	}
	if rep == nil || rep.InitError != "" {
		if o.end == backstopped {
			return timeoutError(job, lim)
		}
		msg := o.lost.why
		if rep != nil {
			msg = "runbox-init: " + rep.InitError
		}
		return ptr(contract.SandboxFailed(msg))
	}
	if rep.StartError != "" {
		return ptr(contract.InterpreterMissing(rep.StartError, job.Language.Name, job.Language.Image))
	}
	if rep.TimedOut || o.end == backstopped {
		return timeoutError(job, lim)
	}
	codePath := manifest.Workspace + "/" + job.Language.File
	le, parsed := langerr.Parse(job.Language.ErrorFormat, stderr, codePath, job.Code)
	if rep.CheckFailed {
		if !parsed {
			le = langerr.Error{Kind: contract.KindSyntax, Message: contract.LastLine(stderr)}
		}
		return langError(contract.KindSyntax, le)
	}
	if sig := rep.Signal; sig == sigXCPU || (sig == sigKILL && lim.CPUSeconds > 0 && rep.CPUMs >= lim.CPUSeconds*1000) {
		return ptr(contract.CPUTime(lim.CPUSeconds))
	}
	if seccompDeath(rep) || (rep.Signal == sigSEGV && o.syscall != "") {
		// A SIGSEGV has a name only when the kernel log tied it to an
		// int 0x80 on a kernel without the 32-bit ABI.
		return ptr(contract.Forbidden(o.syscall))
	}
	if rep.ExitCode != 0 {
		if parsed && le.Kind == contract.KindSyntax {
			return langError(contract.KindSyntax, le)
		}
		if limit := resourceLimit(rep, stderr); limit != "" {
			info := contract.Resource(limit, lim)
			if parsed {
				info.Type, info.Line, info.Column = le.Type, le.Line, le.Column
			}
			return &info
		}
		if parsed {
			return langError(contract.KindRuntime, le)
		}
		if rep.Signal != 0 {
			return ptr(contract.KilledBySignal(signalName(rep.Signal)))
		}
		return ptr(contract.Exited(rep.ExitCode, contract.LastLine(stderr)))
	}
	if rep.StdoutTruncated || rep.StderrTruncated {
		return ptr(contract.OutputCut(rep.StdoutBytes, rep.StderrBytes, lim.OutputBytes))
	}
	return nil
}

func ptr(info contract.ErrorInfo) *contract.ErrorInfo { return &info }

func timeoutError(job contract.Job, lim manifest.Limits) *contract.ErrorInfo {
	more := 0.0
	if job.Timeout < lim.MaxTimeout() {
		more = lim.MaxTimeoutSeconds
	}
	return ptr(contract.Timeout(job.Timeout, more))
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
	return langerr.ResourceHint(stderr)
}

func langError(kind contract.Kind, le langerr.Error) *contract.ErrorInfo {
	return ptr(contract.Language(kind, le.Type, le.Message, le.Line, le.Column))
}
