//go:build linux

package boxinit

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/procstat"
)

// program is how a call's code runs, the one thing in which a one-off job
// (Run: a fresh process, or the pooled box's prestarted interpreter) and a
// session's cell (session.run: a cell sent to the session's interpreter)
// differ. Everything around it is call's, the same both ways.
type program struct {
	// replace says that the job's files and code replace files already in
	// the workspace (a session's earlier calls left them); a fresh box's
	// workspace has none, and a file there twice is an error.
	replace bool
	// pid is a process that lives before and across the call (the
	// prestarted or the session's interpreter), 0 if none: the CPU time
	// it spent before the call is not the call's.
	pid int
	// run runs the job's code, enforcing its deadline and output caps, and
	// says how it ended.
	run func(ctx context.Context, job *initproto.Job) runResult
}

// runResult is how a call's code ran.
type runResult struct {
	startErr    string
	timedOut    bool
	checkFailed bool // the syntax check refused the code: it did not run
	exitCode    int
	signal      int
	wall        time.Duration
	ended       time.Time // when the program was seen to end
	stdout      *capture
	stderr      *capture
}

// newRunResult is a result whose captures hold the job's output cap.
func newRunResult(job *initproto.Job) runResult {
	res := runResult{stdout: newCapture(job.MaxOutputBytes), stderr: newCapture(job.MaxOutputBytes)}
	res.stdout.peer = res.stderr
	return res
}

// setStatus takes the exit code and signal from a process's wait status.
func (r *runResult) setStatus(st syscall.WaitStatus) {
	switch {
	case st.Exited():
		r.exitCode = st.ExitStatus()
	case st.Signaled():
		r.signal = int(st.Signal())
		r.exitCode = 128 + r.signal
	}
}

// stages notes the times a call's stages ended, when its job asks for them
// (Job.Trace); a nil stages notes nothing.
type stages struct{ marks []initproto.Mark }

// newStages is where a call's stage times go: nil unless job asks.
func newStages(job *initproto.Job) *stages {
	if job == nil || !job.Trace {
		return nil
	}
	return &stages{}
}

func (s *stages) mark(stage string) {
	if s != nil {
		s.marks = append(s.marks, initproto.Mark{Stage: stage, At: time.Now().UnixNano()})
	}
}

// call is the one call algorithm of runbox-init: it unpacks the job's
// files and code, starts the box services, runs the program, and reports
// how it ended, what it used and which limits it met, with the artifacts
// it left. opts carry the defaults (withDefaults) and the call's Host.
func call(ctx context.Context, job *initproto.Job, opts Options, prog program) (*initproto.Report, [][]byte) {
	st := opts.stages
	if st == nil {
		st = newStages(job)
	}
	inputs, err := unpack(job, prog.replace)
	if err != nil {
		if full := noSpace(job, err); full != nil {
			return full, nil
		}
		return &initproto.Report{InitError: err.Error()}, nil
	}
	stopServices, err := startServices(ctx, opts, job)
	if err != nil {
		return &initproto.Report{InitError: err.Error()}, nil
	}
	// Stopped when the program has ended, before the report goes out. A
	// process a session's cell leaves behind finds them gone until the
	// next cell.
	defer stopServices()
	st.mark("box: unpack, services")
	before := baseline{stamps: snapshot(job.Dir), inputs: inputs}
	st.mark("box: workspace walk before")
	_ = clearDisplays(initproto.DisplaySpool)

	cg := cgroupFiles(opts.CgroupRoot)
	oomBefore, pidsBefore := cg.oomKills(), cg.pidsMaxEvents()
	cpuBefore := cpuMs(prog.pid)
	st.mark("box: metrics before")

	res := prog.run(ctx, job)
	st.mark("box: output drained")

	rep := &initproto.Report{
		StartError:  res.startErr,
		TimedOut:    res.timedOut,
		CheckFailed: res.checkFailed,
		ExitCode:    res.exitCode,
		Signal:      res.signal,
		WallMs:      res.wall.Milliseconds(),
		OOMKills:    -1,
	}
	if !res.ended.IsZero() {
		rep.EndedUnixMs = res.ended.UnixMilli()
	}
	rep.Stdout, rep.StdoutTruncated, rep.StdoutBytes = res.stdout.bytes()
	rep.Stderr, rep.StderrTruncated, rep.StderrBytes = res.stderr.bytes()
	rep.CPUMs = max(0, cpuMs(prog.pid)-cpuBefore)
	rep.PeakMemoryBytes = cg.peakMemory()
	if rep.PeakMemoryBytes <= 0 {
		// No cgroup figure (gVisor): the largest reaped child's, or a
		// live interpreter's own high-water mark (a session's, not
		// reaped; its peak so far, as a process's maxrss is).
		var usage unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &usage)
		rep.PeakMemoryBytes = max(usage.Maxrss*1024, highWater(prog.pid))
	}
	if after := cg.oomKills(); after >= 0 && oomBefore >= 0 {
		rep.OOMKills = after - oomBefore
	}
	rep.PidsLimitHit = cg.pidsMaxEvents() > pidsBefore
	rep.DiskFull = fullMount(opts.Scratch)
	st.mark("box: metrics after")
	contents := collect(job, before, rep)
	displays, spooled := collectDisplays(initproto.DisplaySpool, job, res.stdout.displayMarks(), rep.StdoutBytes, rep.StderrBytes, rep)
	contents = append(contents, displays...)
	if spooled {
		// A session's /tmp is the next call's. An empty spool is left
		// as it is: the next call clears it before its code runs.
		_ = clearDisplays(initproto.DisplaySpool)
	}
	st.mark("box: workspace walk after")
	if st != nil {
		rep.Trace = st.marks
	}
	return rep, contents
}

// withDefaults fills in what opts leave unset, for a workspace at dir.
func (opts Options) withDefaults(dir string) (Options, error) {
	if opts.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return opts, err
		}
		opts.Self = self
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = "/sys/fs/cgroup"
	}
	if opts.Scratch == nil {
		opts.Scratch = []string{dir, "/tmp"}
	}
	return opts, nil
}

// cpuMs is the CPU time, in milliseconds, of runbox-init's waited-for
// children and of the live process pid (0: none) with its own waited-for
// children. Its difference over a call is the call's CPU time whatever
// happened meanwhile: a process that ran and was reaped moves from the
// second count to the first, and what a live interpreter used before the
// call (a pooled one's imports, a session's earlier cells) is subtracted.
func cpuMs(pid int) int64 {
	var u unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &u)
	ms := (u.Utime.Sec+u.Stime.Sec)*1000 + (u.Utime.Usec+u.Stime.Usec)/1000
	if pid <= 0 {
		return ms
	}
	var ticks int64
	st, _ := liveStat(pid)
	for _, f := range []int{14, 15, 16, 17} { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(st.Field(f), 10, 64)
		ticks += n
	}
	return ms + ticks*1000/100 // USER_HZ is 100 on Linux
}

// liveStat reads /proc/pid/stat through a descriptor kept open for the
// last pid asked about: a session's interpreter is read twice a cell, and
// a pread of the open file is one syscall where a read of the path is
// five. The descriptor is that process's own: once it has ended, the
// pread fails (whatever process takes its pid later), and the path is
// read instead, as before.
func liveStat(pid int) (procstat.Stat, bool) {
	statOpen.mu.Lock()
	defer statOpen.mu.Unlock()
	if statOpen.pid != pid {
		if statOpen.f != nil {
			_ = statOpen.f.Close()
		}
		statOpen.pid = pid
		statOpen.f, _ = os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	}
	if statOpen.f != nil {
		n, _ := preadStart(statOpen.f, statOpen.buf[:])
		if st, ok := procstat.Parse(statOpen.buf[:n]); ok && n < len(statOpen.buf) {
			return st, true
		}
	}
	return procstat.Read(pid)
}

// statOpen is liveStat's descriptor, the pid it is of and its buffer.
var statOpen struct {
	mu  sync.Mutex
	pid int
	f   *os.File
	buf [4096]byte
}

// highWater is a live process's peak resident memory (VmHWM), or, where
// the kernel keeps no peak (gVisor), its resident memory now, the least
// the peak was; 0 without a process.
func highWater(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	var most int64
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if ok && (name == "VmHWM" || name == "VmRSS") {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			most = max(most, kb*1024)
		}
	}
	return most
}
