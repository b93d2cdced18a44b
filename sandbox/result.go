package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// Status values.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Error kinds of the run_code contract.
const (
	KindSyntax           = "syntax"
	KindRuntime          = "runtime"
	KindTimeout          = "timeout"
	KindOOM              = "oom"
	KindForbiddenSyscall = "forbidden_syscall"
	KindResourceLimit    = "resource_limit"
	KindOutputLimit      = "output_limit"
	KindInvalidRequest   = "invalid_request"
	KindSandbox          = "sandbox"
)

// Limit names for ErrorInfo.Limit.
const (
	LimitWallTime  = "wall_time"
	LimitCPUTime   = "cpu_time"
	LimitMemory    = "memory"
	LimitPids      = "pids"
	LimitDisk      = "disk"
	LimitOpenFiles = "open_files"
	LimitBusy      = "busy"
	LimitBudget    = "budget"
)

// Runner runs jobs in boxes.
type Runner interface {
	// Run runs one job in a fresh box and always returns a result:
	// failures of the engine are results of kind sandbox, not errors.
	Run(ctx context.Context, job Job) Result
	// Close releases the runner; boxes still running are killed.
	Close() error
}

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
type Result struct {
	RunID           string     `json:"run_id" jsonschema:"description=Identifier of this run; artifacts are addressed under it."`
	Language        string     `json:"language"`
	Status          string     `json:"status" jsonschema:"enum=ok,enum=error"`
	ExitCode        *int       `json:"exit_code" jsonschema:"description=The program's exit status (128+N when killed by signal N); null when it never ran."`
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	Error           *ErrorInfo `json:"error" jsonschema:"description=Why the run failed; null when status is ok."`
	Artifacts       []Artifact `json:"artifacts" jsonschema:"description=Files the run created or changed in the workspace."`
	// ArtifactsOmitted counts files left out by the artifact count cap.
	ArtifactsOmitted int     `json:"artifacts_omitted,omitempty" jsonschema:"description=Files left out because the artifact count cap was reached."`
	Metrics          Metrics `json:"metrics"`
	Isolation        string  `json:"isolation" jsonschema:"description=The isolation level the run had: runc or gvisor."`
	Image            string  `json:"image" jsonschema:"description=Digest of the image the run used."`
}

// ErrorInfo is a typed failure an agent can act on.
type ErrorInfo struct {
	Kind    string `json:"kind" jsonschema:"enum=syntax,enum=runtime,enum=timeout,enum=oom,enum=forbidden_syscall,enum=resource_limit,enum=output_limit,enum=invalid_request,enum=sandbox"`
	Type    string `json:"type,omitempty" jsonschema:"description=The language's own name for the error, e.g. ZeroDivisionError."`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty" jsonschema:"description=1-based line in the submitted code."`
	Column  int    `json:"column,omitempty" jsonschema:"description=1-based column in the submitted code."`
	Syscall string `json:"syscall,omitempty" jsonschema:"description=For forbidden_syscall: the system call the sandbox killed the program for, when known."`
	Limit   string `json:"limit,omitempty" jsonschema:"enum=wall_time,enum=cpu_time,enum=memory,enum=pids,enum=disk,enum=open_files,enum=busy,enum=budget"`
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
