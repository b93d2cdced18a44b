package initproto

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// TruncationMarker is inserted where captured output was cut; %d is the
// number of bytes dropped.
const TruncationMarker = "\n…[runbox: %d bytes truncated]…\n"

// Job is everything runbox-init needs to run one program.
type Job struct {
	// Argv runs the program; Check, when set, runs first and a failure
	// means the code does not parse (e.g. bash -n), so nothing executes.
	Argv  []string `json:"argv"`
	Check []string `json:"check,omitempty"`
	// Dir is the workspace: files are unpacked there and it is the
	// program's working directory; artifacts are collected from it.
	Dir      string `json:"dir"`
	CodePath string `json:"code_path"`
	// Code and Stdin travel as the job message's blobs.
	Code  []byte `json:"-"`
	Stdin []byte `json:"-"`
	Files []File `json:"files,omitempty"`
	// Env is the program's whole environment.
	Env []string `json:"env"`

	TimeoutMs  int64 `json:"timeout_ms"`
	CPUSeconds int64 `json:"cpu_seconds,omitempty"`
	// NProc, when positive, sets RLIMIT_NPROC for the program (for
	// runtimes that cannot enforce a pids cgroup).
	NProc int64 `json:"nproc,omitempty"`

	// Streams are the kinds of stream the server serves for this run
	// (its [Streams]' handlers): box-side services offer only these, since a box
	// that opens any other kind is killed.
	Streams []string `json:"streams,omitempty"`
	// StreamBudgets are, by kind, the bytes the box's services may send
	// on that kind's streams in all (a tool call's request and framing):
	// a service refuses, itself, what would pass it, so the server never
	// has to kill a box for one call too many ([Streams].Budgets).
	StreamBudgets map[string]int64 `json:"stream_budgets,omitempty"`
	// Proxy, when set, is the address runbox-init serves its HTTP proxy
	// on before the program starts (ProxyAddr).
	Proxy string `json:"proxy,omitempty"`
	// CA, when set, is runbox's CA certificate (PEM, public): runbox-init
	// writes CABundle with it before the program starts.
	CA []byte `json:"ca,omitempty"`
	// Call names a session's job (a call): the streams its box services
	// open carry it (Header.Call). 0 for a one-off box's job.
	Call uint64 `json:"call,omitempty"`
	// RunID names the run: a server that adopts it after a restart asks
	// for its report by it ([StreamCollect]).
	RunID string `json:"run_id,omitempty"`
	// KeepMs is how long a one-off box waits, once its job has ended, for
	// a server to collect a report that its channel could not deliver (the
	// server died); 0: [DefaultKeep]. The box then exits.
	KeepMs int64 `json:"keep_ms,omitempty"`

	MaxOutputBytes   int   `json:"max_output_bytes"`
	MaxArtifacts     int   `json:"max_artifacts"`
	MaxArtifactBytes int64 `json:"max_artifact_bytes"`

	// Trace asks runbox-init for the times of the call's stages
	// (Report.Trace): a debug aid, off unless the server traces.
	Trace bool `json:"trace,omitempty"`
}

// Mark is when a stage of a call ended, in nanoseconds since the Unix
// epoch (a box shares its kernel's clock with the host).
type Mark struct {
	Stage string `json:"stage"`
	At    int64  `json:"at"`
}

// DefaultKeep is Job.KeepMs when the server sets none.
const DefaultKeep = 10 * time.Minute

// File is an input file, Path relative to Job.Dir.
type File struct {
	Path string `json:"path"`
	// Data travels as a blob of the job message.
	Data []byte `json:"-"`
}

// Report is what happened. Stdout and Stderr are already capped (head and
// tail kept, TruncationMarker between them).
type Report struct {
	// InitError is set when runbox-init itself could not do its part
	// (bad job, cannot write files); nothing else is meaningful then.
	InitError string `json:"init_error,omitempty"`
	// StartError is set when the interpreter could not be started.
	StartError string `json:"start_error,omitempty"`
	// CheckFailed: the syntax check rejected the code; Stderr is the
	// check's and the program never ran.
	CheckFailed bool `json:"check_failed,omitempty"`

	ExitCode int  `json:"exit_code"`
	Signal   int  `json:"signal,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`

	// Stdout and Stderr travel as the report message's blobs.
	Stdout          []byte `json:"-"`
	Stderr          []byte `json:"-"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`

	WallMs int64 `json:"wall_ms"`
	// EndedUnixMs is when the program was seen to end, by the host's
	// clock (a box shares its kernel's): it finds the kernel's record of a
	// seccomp kill among other boxes'.
	EndedUnixMs     int64 `json:"ended_unix_ms,omitempty"`
	CPUMs           int64 `json:"cpu_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// OOMKills counts kernel OOM kills in the box's memory cgroup, -1 when
	// the cgroup cannot be read from inside.
	OOMKills int64 `json:"oom_kills"`
	// PidsLimitHit: the pids cgroup refused a fork during the run.
	PidsLimitHit bool `json:"pids_limit_hit,omitempty"`
	// DiskFull names a writable mount left with no space or inodes.
	DiskFull string `json:"disk_full,omitempty"`

	Artifacts []Artifact `json:"artifacts,omitempty"`
	// ArtifactsOmitted counts files left out by the count cap.
	ArtifactsOmitted int `json:"artifacts_omitted,omitempty"`
	// Displays are what the code displayed, in order (display.go).
	Displays []Display `json:"displays,omitempty"`
	// DisplaysOmitted counts displays past MaxDisplays.
	DisplaysOmitted int `json:"displays_omitted,omitempty"`

	// Session is set by a session box: the session's state after the job.
	Session *SessionState `json:"session,omitempty"`

	// Trace holds the box's stage times when the job asked for them.
	Trace []Mark `json:"trace,omitempty"`
}

// Artifact describes a file the run created or changed. Its content follows
// on an artifact stream only when Sent is true (the byte cap may stop it).
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Sent   bool   `json:"sent"`
	// Display: the content is a display's data ([DisplayMime]), not a
	// workspace file; Path is "<display index>/<name>".
	Display bool `json:"display,omitempty"`
}

// PrestartFlag, followed by an encoded Prestart, tells runbox-init to start
// the interpreter as soon as the box starts, before its job arrives.
const PrestartFlag = "--prestart"

// Prestart is the interpreter a pooled box starts ahead of its job: it
// imports what the manifest preloads, then waits on descriptor 4 for the
// code's path. Env, Dir and limits are the language's, the same for every
// job, so starting early changes nothing but time.
type Prestart struct {
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
	Dir        string   `json:"dir"`
	CPUSeconds int64    `json:"cpu_seconds,omitempty"`
	NProc      int64    `json:"nproc,omitempty"`
}

// EncodePrestart turns a Prestart into one command-line argument.
func EncodePrestart(p Prestart) string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodePrestart reads EncodePrestart's argument.
func DecodePrestart(s string) (Prestart, error) {
	var p Prestart
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	return p, err
}
