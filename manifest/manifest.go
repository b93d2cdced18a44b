package manifest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Isolation levels.
const (
	IsolationRunc   = "runc"
	IsolationGVisor = "gvisor"
)

// DefaultImage is the sandbox image built by `make setup`.
const DefaultImage = "runbox/sandbox:bookworm"

// Workspace is where input files, the code and artifacts live in a box;
// Tmp is the only other writable place.
const (
	Workspace = "/workspace"
	Tmp       = "/tmp"
)

// Manifest is the effective configuration of a runbox server.
type Manifest struct {
	Languages   []Language `json:"languages" jsonschema_description:"The runnable languages; a list here replaces the built-in one."`
	Limits      Limits     `json:"limits" jsonschema_description:"Resource bounds of every run."`
	Isolation   string     `json:"isolation" jsonschema_description:"runc (default) or gvisor (runsc)."`
	Network     Network    `json:"network" jsonschema_description:"What a box may reach: it never has a network interface; declared endpoints are reached through runbox's proxy, each connection checked and recorded."`
	Concurrency int        `json:"concurrency" jsonschema_description:"How many boxes run at once; further calls wait in the queue."`
	// QueueSize bounds how many calls may wait for a slot before new ones
	// are refused with resource_limit/busy.
	QueueSize int `json:"queue_size" jsonschema_description:"How many calls may wait for a slot; past it a call fails at once with resource_limit/busy."`
	// User is the uid:gid the program runs as in the box.
	User string `json:"user" jsonschema_description:"The non-root uid:gid the program runs as."`
	// Artifacts says how long files of a run stay readable and how images
	// reach the client.
	Artifacts ArtifactPolicy `json:"artifacts" jsonschema_description:"How long run files stay readable and how images reach the client."`
	// Budgets bound what one client session may spend, so a looping agent
	// stops burning compute. Zero means unlimited.
	Budgets Budgets `json:"budgets" jsonschema_description:"What one client session may spend; 0 means unlimited."`
	// Pool keeps started boxes waiting for a job, each used once.
	Pool Pool `json:"pool" jsonschema_description:"Warm boxes: started ahead of time, each serving exactly one job."`
	// Cache answers repeats of a deterministic run without a box.
	Cache Cache `json:"cache" jsonschema_description:"Answers an exact repeat (language, code, stdin, files, limits, image) from memory; off by default, since code that reads the clock or randomness would get a stale answer."`
	// Audit writes one JSON line per run.
	Audit Audit `json:"audit" jsonschema_description:"One JSON line per run (who, what, limits, outcome), secret-looking values redacted; read by runbox runs and runbox replay."`
	// Metrics serves Prometheus metrics on the HTTP transports.
	Metrics Metrics `json:"metrics" jsonschema_description:"Prometheus metrics at /metrics on the HTTP transports."`
	// HTTP configures the HTTP transports (serve --transport http or sse).
	HTTP HTTP `json:"http" jsonschema_description:"The HTTP transports (serve --transport http or sse)."`
	// Mounts are host folders every box sees read-only at /mnt/<name>.
	Mounts []Mount `json:"mounts" jsonschema_description:"Host folders every box sees read-only at /mnt/<name> (one-off runs and sessions); a run_code file may name a file in one instead of carrying its content."`
	// Roots says whether the client's MCP roots are mounted too (roots.go).
	Roots Roots `json:"roots" jsonschema_description:"The client's MCP roots (e.g. the IDE's open project), mounted read-only at /mnt/roots/<name> in that client's runs and sessions when mount is true; only folders of this host under one of the under folders. Off by default."`
	// Outputs is a host folder where a call that asks for it gets its
	// artifacts saved, under the run's id.
	Outputs string `json:"outputs" jsonschema_description:"A host folder where a run_code call with save_artifacts gets its artifacts saved, in a folder named for its run id (never overwriting, never outside it); empty: off."`
	// Sessions configures long-lived boxes that keep state between calls.
	Sessions Sessions `json:"sessions" jsonschema_description:"Sessions: a long-lived box per session whose interpreter keeps its state between run_code calls."`
	// Checkpoints bounds the sessions' checkpoints (checkpoints.go).
	Checkpoints Checkpoints `json:"checkpoints" jsonschema_description:"Session checkpoints, restores and forks: kept in the state directory, bounded per client and per server. gVisor (backend oci, isolation gvisor) keeps the interpreter's memory; elsewhere a restore replays the session's cells."`
	// Workspaces are named, persistent /workspace folders that sessions
	// may open (workspaces.go).
	Workspaces Workspaces `json:"workspaces" jsonschema_description:"Named workspaces: a persistent /workspace per caller and name, with a byte quota, that session_open may name; one session at a time."`
	// Backend is where boxes run: docker, oci or kubernetes.
	Backend string `json:"backend" jsonschema:"enum=docker,enum=oci,enum=kubernetes" jsonschema_description:"Where boxes run: docker (default: the local engine), oci (runbox runs runc, or runsc for isolation gvisor, itself, with the same profile and the engine's image, no engine per box: Linux, root) or kubernetes (one pod per run)."`
	// Kubernetes configures the kubernetes backend.
	Kubernetes Kubernetes `json:"kubernetes" jsonschema_description:"The kubernetes backend: cluster, namespace and scheduling of the sandbox pods."`
	// Servers are MCP servers whose tools code in a box can call
	// (servers.go).
	Servers []Server `json:"servers" jsonschema_description:"MCP servers runbox connects to as a client; code in a box calls their tools through runbox (import runbox_tools in Python, require('runbox_tools') in JavaScript)."`
	// ToolCalls bounds what one run's code may do with them.
	ToolCalls ToolCalls `json:"tool_calls" jsonschema_description:"Per-run bounds on the code's calls to the servers' tools."`
	// SavedTools keeps code as tools of its own.
	SavedTools SavedTools `json:"saved_tools" jsonschema_description:"Code saved as tools (save_tool, delete_tool), kept across restarts."`
	// Packages are pinned libraries added to the sandbox image in a
	// derived image (packages.go, images/derived).
	Packages Packages `json:"packages,omitzero" jsonschema_description:"Pinned Python (Debian python3-*) and JavaScript (npm) packages added to the sandbox image: runbox images build (also make setup) builds a derived image holding exactly these, tagged by a hash of the base image's recipe and this list, and the languages whose image is the base run on it."`
}

// Backends.
const (
	BackendDocker     = "docker"
	BackendOCI        = "oci"
	BackendKubernetes = "kubernetes"
)

// Kubernetes configures the kubernetes backend.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; empty means the in-cluster config.
	Kubeconfig   string            `json:"kubeconfig" jsonschema_description:"A kubeconfig file; empty: the in-cluster service account (or $KUBECONFIG when not in a cluster)."`
	Namespace    string            `json:"namespace" jsonschema_description:"The namespace of the sandbox pods."`
	RuntimeClass string            `json:"runtime_class,omitempty" jsonschema_description:"The pods' RuntimeClass, e.g. gvisor; empty: the node's default runtime."`
	NodeSelector map[string]string `json:"node_selector,omitempty" jsonschema_description:"Node labels a sandbox pod must match."`
	Tolerations  []Toleration      `json:"tolerations,omitempty" jsonschema_description:"Taints the sandbox pods tolerate (for dedicated sandbox nodes)."`
	// SeccompProfile is a Localhost profile path relative to the
	// kubelet's seccomp directory; empty means RuntimeDefault.
	SeccompProfile string `json:"seccomp_profile,omitempty" jsonschema_description:"A Localhost seccomp profile (path under the kubelet's seccomp directory); empty: RuntimeDefault."`
	// InitImage holds only runbox-init; empty means
	// runbox/init:<first 16 hex of its sha256>.
	InitImage string `json:"init_image,omitempty" jsonschema_description:"The image holding only runbox-init, copied into each pod by an init container; empty: runbox/init:<first 16 hex of the binary's sha256> (scripts/k8s/import-init.sh builds it)."`
	// KeepInterfaces leaves the pod's network interfaces in place,
	// relying on the cluster's NetworkPolicy alone.
	KeepInterfaces bool `json:"keep_interfaces,omitempty" jsonschema_description:"Leaves the pod's network interfaces in place (for a namespace that must stay at the restricted Pod Security level), relying on the cluster enforcing the deny-all NetworkPolicy. Off (default): an init step of runbox's, the only one with a capability (NET_ADMIN, over the pod's network namespace), removes every interface but lo before the code starts, as on Docker."`
	// WorkspaceStorageClass is the StorageClass of the named workspaces'
	// PersistentVolumeClaims; empty means the cluster's default class.
	WorkspaceStorageClass string `json:"workspace_storage_class,omitempty" jsonschema_description:"The StorageClass of the named workspaces' PersistentVolumeClaims (one per caller and workspace, of workspaces.quota, ReadWriteOnce); empty: the cluster's default class. Its provisioner must enforce the size as a quota (a write past it ENOSPC) for workspaces.quota to hold."`
}

// Toleration is a pod toleration.
type Toleration struct {
	Key      string `json:"key,omitempty" jsonschema_description:"The taint key; empty with operator Exists tolerates everything."`
	Operator string `json:"operator,omitempty" jsonschema:"enum=Equal,enum=Exists" jsonschema_description:"Equal (default) or Exists."`
	Value    string `json:"value,omitempty" jsonschema_description:"The taint value, for Equal."`
	Effect   string `json:"effect,omitempty" jsonschema:"enum=NoSchedule,enum=PreferNoSchedule,enum=NoExecute" jsonschema_description:"The taint effect; empty: all."`
}

// Audit configures the audit log.
type Audit struct {
	Enabled bool `json:"enabled" jsonschema_description:"Writes the audit log."`
	// Path is the log file; empty means the user's state directory.
	Path     string   `json:"path" jsonschema_description:"The log file; empty: $XDG_STATE_HOME/runbox/audit.jsonl (~/.local/state/runbox/audit.jsonl)."`
	MaxBytes ByteSize `json:"max_bytes" jsonschema_description:"The file is rotated (audit.jsonl.1, .2, ...) once it would grow past this."`
	Keep     int      `json:"keep" jsonschema_description:"How many rotated files are kept."`
	// StoreCode keeps code, stdin and input files in each line, which
	// replay needs; off, only their hashes are kept.
	StoreCode bool `json:"store_code" jsonschema_description:"Also stores each run's code, stdin and input files (runbox replay needs them); off, only their sha256."`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Enabled bool `json:"enabled" jsonschema_description:"Serves /metrics on the HTTP transports."`
	// Listen, when set, serves /metrics on its own address instead of the
	// MCP listener.
	Listen string `json:"listen" jsonschema_description:"A separate address for /metrics (e.g. 127.0.0.1:9090); empty: on the MCP listener, behind its token."`
}

// HTTP configures the streamable HTTP and SSE transports.
type HTTP struct {
	// AllowedOrigins are the browser origins, besides the listener's own,
	// whose requests are served: any other Origin header is refused, so
	// that a web page cannot drive the server through a user's browser
	// (DNS rebinding).
	// Tokens are named bearer tokens, one per person or agent of a team
	// server: a session belongs to the token that opened it.
	Tokens         []Token  `json:"tokens,omitempty" jsonschema_description:"Named bearer tokens (one per person or agent); each one's value comes from an environment variable. A session opened with one token is not found with another. With tokens, --auth-token is one more, named default."`
	AllowedOrigins []string `json:"allowed_origins" jsonschema_description:"Browser origins (scheme://host[:port], no path) allowed to use the MCP paths besides the listener's own (and its localhost equivalents), e.g. the https:// origin of a reverse proxy in front of runbox. A request with any other Origin header gets 403; requests without one (non-browser clients) are unaffected."`
	// MaxRequestBytes bounds a request's body: the server holds a body
	// whole while it serves it, so this is the memory one request costs.
	MaxRequestBytes ByteSize `json:"max_request_bytes" jsonschema_description:"Largest request body on the MCP paths; a larger one is refused with 413 before it is read. A call carries its code and files (base64 files take 4/3 of their size), so keep it above limits.max_code_bytes plus 4/3 of limits.max_input_bytes."`
	// MaxConnectionsPerAddress and MaxUnauthenticatedConnections bound
	// what clients can hold open: behind a reverse proxy every client has
	// the proxy's address.
	MaxConnectionsPerAddress      int `json:"max_connections_per_address" jsonschema_description:"Most connections open at once from one client address; past it a new one is closed at once. Behind a reverse proxy every client has the proxy's address: raise it there."`
	MaxUnauthenticatedConnections int `json:"max_unauthenticated_connections" jsonschema_description:"Most connections open at once on which no request has yet shown a valid token (with tokens set); past it a new one is closed at once."`
}

// Cache configures the result cache.
type Cache struct {
	Enabled    bool     `json:"enabled" jsonschema_description:"Turns the result cache on."`
	TTLSeconds float64  `json:"ttl_seconds" jsonschema_description:"How long a result may be reused."`
	MaxBytes   ByteSize `json:"max_bytes" jsonschema_description:"Memory for cached results; the oldest go first."`
}

// TTL returns how long a cached result may be reused.
func (c Cache) TTL() time.Duration { return seconds(c.TTLSeconds) }

// Pool configures the warm pool.
type Pool struct {
	Size              int     `json:"size" jsonschema_description:"Boxes kept started and waiting per language; 0 turns the pool off."`
	RefillConcurrency int     `json:"refill_concurrency" jsonschema_description:"How many boxes are started at once to refill the pools."`
	IdleSeconds       float64 `json:"idle_seconds" jsonschema_description:"A box that waited this long is replaced by a fresh one."`
}

// Idle returns how long a pooled box may wait.
func (p Pool) Idle() time.Duration { return seconds(p.IdleSeconds) }

// Image delivery modes.
const (
	// ImagesInline sends an image content block per image artifact, and a
	// resource link for every artifact.
	ImagesInline = "inline"
	// ImagesResourceLink sends resource links only, for clients that drop
	// image blocks when structured content is present.
	ImagesResourceLink = "resource_link"
)

// ArtifactPolicy governs artifacts after the run.
type ArtifactPolicy struct {
	// TTLSeconds is how long runbox://runs/{id}/files/{path} stays readable.
	TTLSeconds float64 `json:"ttl_seconds" jsonschema_description:"How long runbox://runs/{run_id}/files/{path} stays readable."`
	// StoreBytes caps the artifacts kept in memory; the oldest runs go first.
	StoreBytes    ByteSize `json:"store_bytes" jsonschema_description:"Artifact bytes kept in memory across runs; the oldest runs go first."`
	ImageDelivery string   `json:"image_delivery" jsonschema:"enum=inline,enum=resource_link" jsonschema_description:"inline: image blocks plus resource links; resource_link: links only (for clients that drop images next to structured content)."`
}

// TTL returns the artifacts' time to live.
func (a ArtifactPolicy) TTL() time.Duration { return seconds(a.TTLSeconds) }

// Budgets are per client session.
type Budgets struct {
	// RunSeconds caps the total wall-clock seconds of a session's runs.
	RunSeconds float64 `json:"run_seconds" jsonschema_description:"Total wall-clock seconds of runs per client session."`
	// RunsPerMinute caps how many runs a session starts in any minute.
	RunsPerMinute int `json:"runs_per_minute" jsonschema_description:"Runs a client session may start in any minute."`
}

// Language is one runnable language.
type Language struct {
	Name    string `json:"name" jsonschema_description:"The name agents pass as language."`
	Image   string `json:"image" jsonschema_description:"The image the language runs in."`
	Version string `json:"version,omitempty" jsonschema_description:"The interpreter version told to agents; runbox serve reads it from the image and uses this only when it cannot."`
	// File is the code's name in the workspace (main.py), so that its
	// own imports of sibling files work and tracebacks read naturally.
	File string `json:"file" jsonschema_description:"The code's file name in /workspace, e.g. main.py."`
	// Command runs the code; {file} is replaced by the code's path.
	Command []string `json:"command" jsonschema_description:"The command that runs the code; {file} is the code's path."`
	// Check, when set, runs first and a failure means a syntax error, so
	// that nothing of a malformed script executes (bash -n).
	Check []string `json:"check,omitempty" jsonschema_description:"A syntax check run first ({file} is the code's path); failure means a syntax error and nothing runs."`
	// ErrorFormat names the parser for the interpreter's error reports:
	// python, node, typescript or bash. typescript is Node running
	// runbox's TypeScript runner: a program is type-checked before it runs
	// and its errors name the TypeScript's lines.
	ErrorFormat string `json:"error_format" jsonschema_description:"How to read the interpreter's errors: python, node, typescript, bash or none. typescript: the command runs runbox's TypeScript runner (node /tmp/.runbox/run/runbox_ts.js {file}), which type-checks the program before it runs."`
	// TypeCheck, for a typescript language, says whether a program is
	// type-checked before it runs (the default); false only transpiles it,
	// so that a program with type errors runs anyway.
	TypeCheck *bool `json:"type_check,omitempty" jsonschema_description:"typescript only: type-check a program before it runs (default true); a type error is a syntax_error and nothing runs. false: transpile and run without checking."`
	// Env is added to the box's fixed environment for this language.
	// Preload names modules a pooled box imports before its job arrives,
	// so that importing them in the run costs nothing (python only).
	Preload  []string          `json:"preload,omitempty" jsonschema_description:"Modules a pooled box imports before its job arrives, so importing them costs nothing (python only; needs pool.size > 0). They use memory and a little CPU time of the box's limits."`
	Env      map[string]string `json:"env,omitempty" jsonschema_description:"Environment variables added for this language."`
	Packages []string          `json:"packages,omitempty" jsonschema_description:"Packages told to agents; runbox serve reads them from the image and uses these only when it cannot."`
}

// Limits are the resource bounds of every run.
type Limits struct {
	TimeoutSeconds    float64 `json:"timeout_seconds" jsonschema_description:"Default wall-clock limit of a run."`
	MaxTimeoutSeconds float64 `json:"max_timeout_seconds" jsonschema_description:"The largest timeout_seconds a call may ask for: up to a day, for long runs (answer_within_seconds)."`
	// AnswerWithinSeconds bounds how long a call waits for its run before
	// answering with a handle (status running and the run_id; run_wait
	// and run_cancel take it from there): clients cut calls at about
	// 60 s.
	AnswerWithinSeconds float64 `json:"answer_within_seconds" jsonschema_description:"A run still going after this long answers with status running, its run_id and its output so far, and goes on in the background: run_wait collects it, run_cancel ends it. The default suits a client that waits 60 s; 0 makes every call wait for its run's end. Calls made as MCP tasks are never cut."`
	// MaxBackgroundRuns and MaxBackgroundRunsPerClient cap the long runs
	// held at once (runs answered with a handle and still running, and
	// calls made as MCP tasks): past them a run is refused with
	// resource_limit.
	MaxBackgroundRuns          int `json:"max_background_runs" jsonschema_description:"Most long runs (runs in the background after answer_within_seconds, and calls made as MCP tasks) the server holds at once; past it a run is refused with resource_limit."`
	MaxBackgroundRunsPerClient int `json:"max_background_runs_per_client" jsonschema_description:"Most long runs one client (a bearer token's name over HTTP, the local user over stdio) holds at once; past it its run is refused with resource_limit."`
	// KeptResults and KeptResultsBytes bound the run store: the long runs'
	// and tasks' records in the state directory, which outlive the server
	// process (kept artifacts.ttl_seconds after their end, at least a
	// minute; the oldest finished go first).
	KeptResults      int      `json:"max_kept_results" jsonschema_description:"Most records of long runs and tasks kept in the state directory (runs/), so that they outlive the server; past it the oldest finished go first."`
	KeptResultsBytes ByteSize `json:"kept_results_bytes" jsonschema_description:"Bytes of long runs' and tasks' records (their results) kept in the state directory; past it the oldest finished go first, and a run that still does not fit is not kept past the server's end."`
	// CPUSeconds, when positive, caps the CPU time of the program.
	CPUSeconds int64 `json:"cpu_seconds,omitempty" jsonschema_description:"CPU-time limit of the program in seconds; 0 means none beyond the wall clock."`

	Memory         ByteSize `json:"memory" jsonschema_description:"Memory limit of a box (no swap)."`
	CPUs           float64  `json:"cpus" jsonschema_description:"CPU quota of a box in cores."`
	Pids           int64    `json:"pids" jsonschema_description:"Most processes and threads in a box."`
	OpenFiles      int64    `json:"open_files" jsonschema_description:"Most open files per process."`
	WorkspaceBytes ByteSize `json:"workspace_size" jsonschema_description:"Size of the /workspace tmpfs; also the largest file."`
	WorkspaceFiles int64    `json:"workspace_inodes" jsonschema_description:"Most files and directories in /workspace and in /tmp."`
	TmpBytes       ByteSize `json:"tmp_size" jsonschema_description:"Size of the /tmp tmpfs."`

	OutputBytes ByteSize `json:"max_output_bytes" jsonschema_description:"Output kept per stream: the first and last halves."`
	// AnswerChars bounds the stdout and stderr an answer shows the model,
	// well under every client's own cut (docs/clients.md); the rest of
	// what was kept stays readable as a resource.
	AnswerChars   int      `json:"answer_output_chars" jsonschema_description:"Characters of stdout and stderr together that an answer shows the model (heads and tails); the rest of what was kept is readable as the runbox://runs/{run_id}/stdout and /stderr resources."`
	CodeBytes     ByteSize `json:"max_code_bytes" jsonschema_description:"Largest code a call may send."`
	InputBytes    ByteSize `json:"max_input_bytes" jsonschema_description:"Largest total of input files and stdin."`
	InputFiles    int      `json:"max_input_files" jsonschema_description:"Most input files per call."`
	Artifacts     int      `json:"max_artifacts" jsonschema_description:"Most artifacts returned per run."`
	ArtifactBytes ByteSize `json:"max_artifact_bytes" jsonschema_description:"Most artifact bytes returned per run."`
	// ImageBytes caps one image artifact returned inline as an image
	// content block.
	ImageBytes ByteSize `json:"max_image_bytes" jsonschema_description:"Largest image artifact sent inline as an image block."`
}

// DefaultAnswerChars is what an answer shows of the streams: under the
// smallest cut of the clients tried (Claude Code cuts an error result at
// about 10,000 characters; docs/clients.md), with room left for the
// result's other fields.
const DefaultAnswerChars = 8000

// Timeout returns the default per-call timeout.
func (l Limits) Timeout() time.Duration { return seconds(l.TimeoutSeconds) }

// MaxTimeout returns the largest per-call timeout a caller may ask for.
func (l Limits) MaxTimeout() time.Duration { return seconds(l.MaxTimeoutSeconds) }

// AnswerWithin is how long a call waits for its run before answering
// with a handle; 0: until the run ends.
func (l Limits) AnswerWithin() time.Duration { return seconds(l.AnswerWithinSeconds) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TypeScriptRunner is runbox's TypeScript runner in the box, which
// runbox-init writes there (initproto.TypeScriptRunner).
const TypeScriptRunner = "/tmp/.runbox/run/runbox_ts.js"

// TypeChecked says whether l's programs are type-checked before they run.
func (l Language) TypeChecked() bool { return l.TypeCheck == nil || *l.TypeCheck }

// IsNode says whether l's programs run on Node (JavaScript, TypeScript).
func (l Language) IsNode() bool { return l.ErrorFormat == "node" || l.ErrorFormat == "typescript" }

// Default returns the built-in manifest.
func Default() *Manifest {
	return &Manifest{
		Languages: []Language{
			{
				Name: "python", Image: DefaultImage, File: "main.py",
				Command:     []string{"python3", "{file}"},
				ErrorFormat: "python",
				Env: map[string]string{
					"PYTHONUNBUFFERED":        "1",
					"PYTHONDONTWRITEBYTECODE": "1",
					"MPLBACKEND":              "Agg",
				},
				Packages: []string{"numpy", "pandas", "matplotlib", "scipy", "sympy"},
				Preload:  []string{"numpy", "pandas"},
			},
			{
				Name: "javascript", Image: DefaultImage, File: "main.js",
				Command:     []string{"node", "{file}"},
				ErrorFormat: "node",
			},
			{
				Name: "typescript", Image: DefaultImage, File: "main.ts",
				Command:     []string{"node", TypeScriptRunner, "{file}"},
				ErrorFormat: "typescript",
			},
			{
				Name: "bash", Image: DefaultImage, File: "main.sh",
				Command:     []string{"bash", "{file}"},
				Check:       []string{"bash", "-n", "{file}"},
				ErrorFormat: "bash",
				Packages:    []string{"coreutils"},
			},
		},
		Limits: Limits{
			TimeoutSeconds:    30,
			MaxTimeoutSeconds: 300,
			// A client that waits 60 s gets its answer (or a handle) in
			// time, with room for the answer's way back.
			AnswerWithinSeconds:        45,
			MaxBackgroundRuns:          16,
			MaxBackgroundRunsPerClient: 4,
			KeptResults:                1024,
			KeptResultsBytes:           256 * MiB,
			Memory:                     512 * MiB,
			CPUs:                       1,
			Pids:                       128,
			OpenFiles:                  1024,
			WorkspaceBytes:             64 * MiB,
			WorkspaceFiles:             16384,
			TmpBytes:                   64 * MiB,
			OutputBytes:                256 * KiB,
			AnswerChars:                DefaultAnswerChars,
			CodeBytes:                  512 * KiB,
			InputBytes:                 32 * MiB,
			InputFiles:                 256,
			Artifacts:                  64,
			ArtifactBytes:              32 * MiB,
			ImageBytes:                 4 * MiB,
		},
		Isolation:   IsolationRunc,
		Network:     Network{Allow: []Endpoint{}, MaxBytes: 64 * MiB, ConnectionSeconds: 60, MaxConnections: 256},
		Concurrency: 4,
		QueueSize:   64,
		User:        "1000:1000",
		Artifacts:   ArtifactPolicy{TTLSeconds: 3600, StoreBytes: 512 * MiB, ImageDelivery: ImagesInline},
		Budgets:     Budgets{RunSeconds: 0, RunsPerMinute: 0},
		Pool:        Pool{Size: 0, RefillConcurrency: 2, IdleSeconds: 600},
		Cache:       Cache{Enabled: false, TTLSeconds: 600, MaxBytes: 64 * MiB},
		Audit:       Audit{Enabled: true, MaxBytes: 64 * MiB, Keep: 3},
		Metrics:     Metrics{Enabled: true},
		HTTP:        HTTP{AllowedOrigins: []string{}, MaxRequestBytes: 64 * MiB, MaxConnectionsPerAddress: 64, MaxUnauthenticatedConnections: 256},
		Backend:     BackendDocker,
		Kubernetes:  Kubernetes{Namespace: "runbox-sandbox"},
		Servers:     []Server{},
		ToolCalls:   ToolCalls{MaxCalls: 200, MaxBytes: 64 * MiB, CallTimeoutSeconds: 60},
		Sessions:    DefaultSessions(),
		Checkpoints: DefaultCheckpoints(),
		Workspaces:  DefaultWorkspaces(),
		Mounts:      []Mount{},
		Roots:       Roots{Under: []string{}},
	}
}

// Language returns the language called name.
func (m *Manifest) Language(name string) (Language, bool) {
	i := slices.IndexFunc(m.Languages, func(l Language) bool { return l.Name == name })
	if i < 0 {
		return Language{}, false
	}
	return m.Languages[i], true
}

// LanguageNames lists the languages in manifest order.
func (m *Manifest) LanguageNames() []string {
	names := make([]string, len(m.Languages))
	for i, l := range m.Languages {
		names[i] = l.Name
	}
	return names
}

// FieldError says which field is wrong, what it holds and what is allowed.
type FieldError struct {
	Field   string
	Value   any
	Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("manifest: %s = %v: %s", e.Field, e.Value, e.Allowed)
}

var (
	nameRe = regexp.MustCompile(`^[a-z][a-z0-9_+-]{0,31}$`)
	userRe = regexp.MustCompile(`^[1-9][0-9]{0,9}:[1-9][0-9]{0,9}$`)
	fileRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// Validate checks every field and returns all problems joined.
func (m *Manifest) Validate() error {
	var errs []error
	bad := func(field string, value any, allowed string) {
		errs = append(errs, &FieldError{field, value, allowed})
	}
	if len(m.Languages) == 0 {
		bad("languages", "[]", "at least one language")
	}
	seen := map[string]bool{}
	for i, l := range m.Languages {
		f := fmt.Sprintf("languages[%d]", i)
		switch {
		case !nameRe.MatchString(l.Name):
			bad(f+".name", l.Name, "lower-case letters, digits, _ + -, at most 32")
		case seen[l.Name]:
			bad(f+".name", l.Name, "unique")
		}
		seen[l.Name] = true
		if l.Image == "" {
			bad(f+".image", `""`, "an image reference")
		}
		if !fileRe.MatchString(l.File) || l.File == "." || l.File == ".." {
			bad(f+".file", l.File, "a plain file name such as main.py")
		}
		if len(l.Command) == 0 || !slices.Contains(l.Command, "{file}") {
			bad(f+".command", l.Command, "a command that names {file}")
		}
		if len(l.Check) > 0 && !slices.Contains(l.Check, "{file}") {
			bad(f+".check", l.Check, "empty, or a command that names {file}")
		}
		if !slices.Contains([]string{"python", "node", "typescript", "bash", "none"}, l.ErrorFormat) {
			bad(f+".error_format", l.ErrorFormat, "python, node, typescript, bash or none")
		}
		if l.TypeCheck != nil && l.ErrorFormat != "typescript" {
			bad(f+".type_check", *l.TypeCheck, "only with error_format typescript")
		}
	}
	lim := m.Limits
	rangeF := func(field string, v, lo, hi float64) {
		if !(v >= lo && v <= hi) {
			bad(field, v, fmt.Sprintf("from %g to %g", lo, hi))
		}
	}
	rangeI := func(field string, v, lo, hi int64) {
		if v < lo || v > hi {
			bad(field, v, fmt.Sprintf("from %d to %d", lo, hi))
		}
	}
	rangeB := func(field string, v, lo, hi ByteSize) {
		if v < lo || v > hi {
			bad(field, v, fmt.Sprintf("from %s to %s", lo, hi))
		}
	}
	rangeF("limits.max_timeout_seconds", lim.MaxTimeoutSeconds, 1, 24*3600)
	rangeF("limits.answer_within_seconds", lim.AnswerWithinSeconds, 0, 3600)
	rangeI("limits.max_background_runs", int64(lim.MaxBackgroundRuns), 0, 100000)
	rangeI("limits.max_background_runs_per_client", int64(lim.MaxBackgroundRunsPerClient), 0, int64(lim.MaxBackgroundRuns))
	rangeI("limits.max_kept_results", int64(lim.KeptResults), 1, 1000000)
	rangeB("limits.kept_results_bytes", lim.KeptResultsBytes, 1*MiB, 64*GiB)
	rangeF("limits.timeout_seconds", lim.TimeoutSeconds, 0.1, lim.MaxTimeoutSeconds)
	rangeI("limits.cpu_seconds", lim.CPUSeconds, 0, 3600)
	rangeB("limits.memory", lim.Memory, 16*MiB, 64*GiB)
	rangeF("limits.cpus", lim.CPUs, 0.05, 64)
	rangeI("limits.pids", lim.Pids, 8, 32768)
	rangeI("limits.open_files", lim.OpenFiles, 32, 1<<20)
	rangeB("limits.workspace_size", lim.WorkspaceBytes, 1*MiB, 16*GiB)
	rangeI("limits.workspace_inodes", lim.WorkspaceFiles, 64, 1<<22)
	rangeB("limits.tmp_size", lim.TmpBytes, 1*MiB, 16*GiB)
	rangeB("limits.max_output_bytes", lim.OutputBytes, 1*KiB, 64*MiB)
	rangeI("limits.answer_output_chars", int64(lim.AnswerChars), 1000, 64<<20)
	rangeB("limits.max_code_bytes", lim.CodeBytes, 1*KiB, 16*MiB)
	rangeB("limits.max_input_bytes", lim.InputBytes, 0, lim.WorkspaceBytes)
	rangeI("limits.max_input_files", int64(lim.InputFiles), 0, 10000)
	rangeI("limits.max_artifacts", int64(lim.Artifacts), 0, 10000)
	rangeB("limits.max_artifact_bytes", lim.ArtifactBytes, 0, 1*GiB)
	rangeB("limits.max_image_bytes", lim.ImageBytes, 0, lim.ArtifactBytes)
	if m.Isolation != IsolationRunc && m.Isolation != IsolationGVisor {
		bad("isolation", m.Isolation, "runc or gvisor")
	}
	m.Network.validate(bad)
	rangeI("concurrency", int64(m.Concurrency), 1, 1024)
	rangeI("queue_size", int64(m.QueueSize), 0, 100000)
	rangeF("artifacts.ttl_seconds", m.Artifacts.TTLSeconds, 0, 7*24*3600)
	rangeB("artifacts.store_bytes", m.Artifacts.StoreBytes, 0, 64*GiB)
	if m.Artifacts.ImageDelivery != ImagesInline && m.Artifacts.ImageDelivery != ImagesResourceLink {
		bad("artifacts.image_delivery", m.Artifacts.ImageDelivery, "inline or resource_link")
	}
	rangeF("budgets.run_seconds", m.Budgets.RunSeconds, 0, 1e9)
	rangeI("budgets.runs_per_minute", int64(m.Budgets.RunsPerMinute), 0, 1e6)
	rangeI("pool.size", int64(m.Pool.Size), 0, 256)
	rangeI("pool.refill_concurrency", int64(m.Pool.RefillConcurrency), 1, 64)
	rangeF("pool.idle_seconds", m.Pool.IdleSeconds, 10, 86400)
	rangeF("cache.ttl_seconds", m.Cache.TTLSeconds, 1, 7*24*3600)
	rangeB("cache.max_bytes", m.Cache.MaxBytes, 0, 16*GiB)
	rangeB("audit.max_bytes", m.Audit.MaxBytes, 64*KiB, 64*GiB)
	m.Sessions.validate(rangeI, rangeF, rangeB)
	m.Checkpoints.validate(rangeI, rangeF, rangeB)
	m.Workspaces.validate(bad, rangeI, rangeB)
	m.Sessions.Expose.validate(bad, rangeI)
	m.validateMounts(bad)
	m.Roots.validate(bad)
	m.HTTP.validateTokens(bad)
	rangeB("http.max_request_bytes", m.HTTP.MaxRequestBytes, 64*KiB, 4*GiB)
	rangeI("http.max_connections_per_address", int64(m.HTTP.MaxConnectionsPerAddress), 1, 100000)
	rangeI("http.max_unauthenticated_connections", int64(m.HTTP.MaxUnauthenticatedConnections), 1, 100000)
	rangeI("audit.keep", int64(m.Audit.Keep), 0, 1000)
	if m.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(m.Metrics.Listen); err != nil {
			bad("metrics.listen", m.Metrics.Listen, "host:port")
		}
	}
	for i, o := range m.HTTP.AllowedOrigins {
		if !isOrigin(o) {
			bad(fmt.Sprintf("http.allowed_origins[%d]", i), o, "an origin: http:// or https://, a host and an optional port, nothing after it (e.g. https://runbox.example.com)")
		}
	}
	switch m.Backend {
	case BackendDocker:
	case BackendOCI:
		if m.Isolation != IsolationRunc && m.Isolation != IsolationGVisor {
			bad("isolation", m.Isolation, "runc or gvisor with backend oci")
		}
	case BackendKubernetes:
		m.Kubernetes.validate(bad)
		if m.Isolation == IsolationGVisor && m.Kubernetes.RuntimeClass == "" {
			bad("kubernetes.runtime_class", `""`, "the RuntimeClass that runs gVisor (e.g. gvisor) when isolation is gvisor")
		}
	default:
		bad("backend", m.Backend, "docker, oci or kubernetes")
	}
	m.validateServers(bad)
	m.Packages.normalize()
	m.Packages.validate(bad)
	if !userRe.MatchString(m.User) {
		bad("user", m.User, "a non-root numeric uid:gid such as 1000:1000")
	}
	return errors.Join(errs...)
}

var (
	dnsLabelRe  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubRe    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	labelKeyRe  = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValRe  = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	seccompPath = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,255}$`)
)

// isOrigin says whether s is a browser origin: scheme://host[:port] with
// scheme http or https and nothing after the port.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Hostname() == "" {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n >= 1 && n <= 65535
	}
	return true
}

func (k Kubernetes) validate(bad func(field string, value any, allowed string)) {
	if !dnsLabelRe.MatchString(k.Namespace) {
		bad("kubernetes.namespace", k.Namespace, "a namespace name (lower-case letters, digits and -, at most 63)")
	}
	if k.RuntimeClass != "" && !dnsSubRe.MatchString(k.RuntimeClass) {
		bad("kubernetes.runtime_class", k.RuntimeClass, "empty or a RuntimeClass name such as gvisor")
	}
	if k.WorkspaceStorageClass != "" && !dnsSubRe.MatchString(k.WorkspaceStorageClass) {
		bad("kubernetes.workspace_storage_class", k.WorkspaceStorageClass, "empty or a StorageClass name such as standard")
	}
	for key, v := range k.NodeSelector {
		if !labelKeyRe.MatchString(key) || !labelValRe.MatchString(v) {
			bad("kubernetes.node_selector", key+"="+v, "label keys and values as Kubernetes allows them")
		}
	}
	for i, t := range k.Tolerations {
		f := fmt.Sprintf("kubernetes.tolerations[%d]", i)
		if !slices.Contains([]string{"", "Equal", "Exists"}, t.Operator) {
			bad(f+".operator", t.Operator, "Equal or Exists")
		}
		if !slices.Contains([]string{"", "NoSchedule", "PreferNoSchedule", "NoExecute"}, t.Effect) {
			bad(f+".effect", t.Effect, "empty, NoSchedule, PreferNoSchedule or NoExecute")
		}
		if t.Key != "" && !labelKeyRe.MatchString(t.Key) {
			bad(f+".key", t.Key, "a taint key")
		}
		if t.Operator == "Exists" && t.Value != "" {
			bad(f+".value", t.Value, "empty with operator Exists")
		}
	}
	if k.SeccompProfile != "" && (!seccompPath.MatchString(k.SeccompProfile) || slices.Contains(strings.Split(k.SeccompProfile, "/"), "..")) {
		bad("kubernetes.seccomp_profile", k.SeccompProfile, "empty (RuntimeDefault) or a relative path under the kubelet's seccomp directory")
	}
}
