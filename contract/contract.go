package contract

import (
	"fmt"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// Status is a run's overall outcome.
type Status string

// Status values.
const (
	StatusOK    Status = "ok"
	StatusError Status = "error"
	// StatusRunning: the run goes on in the background; the answer is a
	// handle (Running), run_wait collects the result.
	StatusRunning Status = "running"
)

// Kind is the contract's type of failure.
type Kind string

// Error kinds of the run_code contract.
const (
	KindSyntax           Kind = "syntax"
	KindRuntime          Kind = "runtime"
	KindTimeout          Kind = "timeout"
	KindOOM              Kind = "oom"
	KindForbiddenSyscall Kind = "forbidden_syscall"
	KindResourceLimit    Kind = "resource_limit"
	KindOutputLimit      Kind = "output_limit"
	KindInvalidRequest   Kind = "invalid_request"
	KindSandbox          Kind = "sandbox"
	// KindForbiddenNetwork: the run failed after the proxy refused one of
	// its connections (an endpoint the manifest does not declare).
	KindForbiddenNetwork Kind = "forbidden_network"
)

// Limit names the limit a timeout, resource_limit or oom hit.
type Limit string

// Limit names for ErrorInfo.Limit.
const (
	LimitWallTime  Limit = "wall_time"
	LimitCPUTime   Limit = "cpu_time"
	LimitMemory    Limit = "memory"
	LimitPids      Limit = "pids"
	LimitDisk      Limit = "disk"
	LimitOpenFiles Limit = "open_files"
	LimitBusy      Limit = "busy"
	LimitBudget    Limit = "budget"
	// LimitBackgroundRuns: the long runs a client or the server may hold
	// at once (limits.max_background_runs, _per_client).
	LimitBackgroundRuns Limit = "background_runs"
)

// Limits lists every limit name, in the order the contract names them.
var Limits = []Limit{LimitWallTime, LimitCPUTime, LimitMemory, LimitPids, LimitDisk, LimitOpenFiles, LimitBusy, LimitBudget, LimitBackgroundRuns}

// Job is one validated request to run code.
type Job struct {
	RunID    string
	Language manifest.Language
	Code     string
	Stdin    string
	Files    []File
	Timeout  time.Duration
}

// File is an input file, Path relative to the workspace.
type File struct {
	Path string
	Data []byte
}

// Result is the outcome of a run, exactly as the run_code contract shows it.
//
// The fields an agent acts on come first and the bulky streams last: a
// client that cuts a long answer (a preview, a head-only cut) keeps the
// status, the error, the session and the artifacts (docs/clients.md).
type Result struct {
	RunID    string     `json:"run_id" jsonschema:"description=Identifier of this run; artifacts and the whole output are addressed under it."`
	Language string     `json:"language"`
	Status   Status     `json:"status" jsonschema:"enum=ok,enum=error,enum=running"`
	ExitCode *int       `json:"exit_code" jsonschema:"description=The program's exit status (128+N when killed by signal N); null when it never ran."`
	Error    *ErrorInfo `json:"error" jsonschema:"description=Why the run failed; null when status is ok."`
	// Running is set, with the run's id and language and its output so
	// far (Stdout, Stderr), when Status is running.
	Running *Running `json:"running,omitempty" jsonschema_description:"Present when status is running: the run goes on in the background; call run_wait with run_id to collect its result, run_cancel to stop it."`
	// Session is set when the call ran in a session (run_code's session_id).
	Session *SessionRef `json:"session,omitempty" jsonschema:"description=The session the call ran in: its id, the call's number and whether its state lives on."`
	// StdoutTruncated: the stdout in this answer is not all the program
	// wrote (StdoutCut says what is left out and where the rest is).
	StdoutTruncated bool `json:"stdout_truncated" jsonschema_description:"True when the stdout below is not all the program wrote: stdout_cut says how much is left out and where to read it."`
	StderrTruncated bool `json:"stderr_truncated" jsonschema_description:"True when the stderr below is not all the program wrote: stderr_cut says how much is left out and where to read it."`
	// StdoutCut and StderrCut say what a cut stream leaves out.
	StdoutCut *Cut       `json:"stdout_cut,omitempty" jsonschema_description:"Present when stdout is cut: its whole size, what this answer shows, and the resource holding all that runbox kept."`
	StderrCut *Cut       `json:"stderr_cut,omitempty" jsonschema_description:"Present when stderr is cut: its whole size, what this answer shows, and the resource holding all that runbox kept."`
	Artifacts []Artifact `json:"artifacts" jsonschema:"description=Files the run created or changed in the workspace."`
	// ArtifactsOmitted counts files left out by the artifact count cap.
	ArtifactsOmitted int `json:"artifacts_omitted,omitempty" jsonschema:"description=Files left out because the artifact count cap was reached."`
	// Displays are what the code displayed, in order (display.go).
	Displays []Display `json:"displays,omitempty" jsonschema_description:"What the code displayed (display(), _repr_*_ objects, matplotlib figures shown or left open, a session cell's last rich value, console.table), in order: each one's representations, where it falls in the output and its resources. Absent when nothing was displayed."`
	// DisplaysOmitted counts displays past the count a run keeps.
	DisplaysOmitted int `json:"displays_omitted,omitempty" jsonschema_description:"Displays left out because the run made more than it keeps."`
	// Roots are the client's MCP roots mounted in the run's box.
	Roots []Root `json:"roots,omitempty" jsonschema:"description=Your client's roots (e.g. the open project) mounted read-only in this run: the folder's path in the box and the root it is. Absent when none are mounted."`
	// Network lists the connections the program made or tried through
	// the proxy, when the manifest declares endpoints.
	Network   []Connection `json:"network,omitempty" jsonschema_description:"Each connection the program made or tried through runbox's proxy: host, port, allowed or refused and by which manifest entry, bytes each way, duration. Absent when the manifest declares no endpoints."`
	Metrics   Metrics      `json:"metrics"`
	Isolation string       `json:"isolation" jsonschema:"description=The isolation level the run had: runc or gvisor."`
	Image     string       `json:"image" jsonschema:"description=Digest of the image the run used."`
	Stdout    string       `json:"stdout" jsonschema_description:"What the program wrote to stdout; when stdout_truncated, its head and tail around a marker that says what is cut and where all of it is."`
	Stderr    string       `json:"stderr" jsonschema_description:"What the program wrote to stderr; when stderr_truncated, its head and tail around a marker that says what is cut and where all of it is."`
	// StdoutBytes and StderrBytes are the streams' whole sizes as the
	// program wrote them (the captured text may be cut).
	StdoutBytes int64 `json:"-"`
	StderrBytes int64 `json:"-"`
}

// Running is the handle of a run still going when its call answered.
type Running struct {
	ElapsedMs int64 `json:"elapsed_ms" jsonschema_description:"How long the run has been going."`
	// Output says what the answer's stdout and stderr are: the output so
	// far (OutputSoFar), or why none is shown (StillRunning).
	Output string `json:"output" jsonschema_description:"What this answer's stdout and stderr are: the output so far (bytes written to each stream until now), or why none is shown; the whole output comes with the result."`
	Next   string `json:"next" jsonschema_description:"What to call next."`
}

// Cut says what an answer leaves out of a stream, and where the rest is.
type Cut struct {
	// Bytes is the whole stream as the program wrote it.
	Bytes int64 `json:"bytes" jsonschema:"description=Bytes the program wrote to the stream."`
	// Shown is the characters of the stream this answer shows.
	Shown int `json:"shown_chars" jsonschema_description:"Characters of the stream shown in this answer: its head and its tail."`
	// URI is the resource with all that runbox kept of the stream.
	URI string `json:"uri,omitempty" jsonschema_description:"The resource (resources/read) holding all that runbox kept of the stream: the whole of it, or its first and last limits.max_output_bytes/2. Absent when this answer already shows all that was kept."`
}

// ErrorInfo is a typed failure an agent can act on.
type ErrorInfo struct {
	Kind    Kind   `json:"kind"`
	Type    string `json:"type,omitempty" jsonschema:"description=The language's own name for the error, e.g. ZeroDivisionError."`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty" jsonschema:"description=1-based line in the submitted code."`
	Column  int    `json:"column,omitempty" jsonschema:"description=1-based column in the submitted code."`
	Syscall string `json:"syscall,omitempty" jsonschema:"description=For forbidden_syscall: the system call the sandbox killed the program for, when known."`
	Limit   Limit  `json:"limit,omitempty" jsonschema:"enum=wall_time,enum=cpu_time,enum=memory,enum=pids,enum=disk,enum=open_files,enum=busy,enum=budget,enum=background_runs"`
	Hint    string `json:"hint"`
}

// Where says where in the code the error is: " at line 3, column 5", or "".
func (e *ErrorInfo) Where() string {
	switch {
	case e.Line <= 0:
		return ""
	case e.Column > 0:
		return fmt.Sprintf(" at line %d, column %d", e.Line, e.Column)
	}
	return fmt.Sprintf(" at line %d", e.Line)
}

// Artifact is a file the run created or changed.
type Artifact struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	MimeType  string `json:"mime_type"`
	SHA256    string `json:"sha256"`
	URI       string `json:"uri"`
	// ContentOmitted: the byte cap stopped the content; only the
	// metadata is known.
	ContentOmitted bool `json:"content_omitted,omitempty"`
	// SavedTo is where the artifact was saved on the host (save_artifacts).
	SavedTo string `json:"saved_to,omitempty" jsonschema:"description=Where the artifact was saved in the outputs folder, when the call asked for it."`
	// Data is the content, kept out of the structured result.
	Data []byte `json:"-"`
}

// Metrics measure a run.
type Metrics struct {
	WallMs          int64 `json:"wall_ms"`
	CPUMs           int64 `json:"cpu_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	QueueMs         int64 `json:"queue_ms"`
	// StartupMs is the time from taking a slot to the program starting
	// (box creation and start).
	StartupMs int64 `json:"startup_ms"`
	Pooled    bool  `json:"pooled"`
	Cached    bool  `json:"cached"`
}

// Fail returns a result that carries only an error, for runs that never
// reached a box.
func Fail(job Job, info ErrorInfo) Result {
	return Result{RunID: job.RunID, Language: job.Language.Name, Status: StatusError, Error: &info, Artifacts: []Artifact{}}
}

// ArtifactURIPrefix starts every artifact URI; ArtifactURITemplate is the
// resource template that serves them.
const (
	ArtifactURIPrefix   = "runbox://runs/"
	ArtifactURITemplate = ArtifactURIPrefix + "{run_id}/files/{+path}"
)

// ArtifactURI is where an artifact of a run can be read back.
func ArtifactURI(runID, p string) string {
	return ArtifactURIPrefix + runID + "/files/" + p
}

// ParseArtifactURI splits an artifact URI into its run and path.
func ParseArtifactURI(uri string) (runID, p string, ok bool) {
	rest, ok := strings.CutPrefix(uri, ArtifactURIPrefix)
	if !ok {
		return "", "", false
	}
	runID, p, ok = strings.Cut(rest, "/files/")
	return runID, p, ok && runID != "" && p != ""
}
