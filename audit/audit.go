package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/statefile"

	"github.com/runbox-mcp/runbox/manifest"
)

// Entry is one run.
type Entry struct {
	RunID     string    `json:"run_id"`
	Time      time.Time `json:"time"`
	Client    Client    `json:"client"`
	Transport string    `json:"transport"`
	Language  string    `json:"language"`
	// CodeSHA256 identifies the code even when it is not stored.
	CodeSHA256 string `json:"code_sha256"`
	// Args are the call's arguments, kept only with audit.store_code:
	// what replay runs again.
	Args      json.RawMessage  `json:"args,omitempty"`
	Image     string           `json:"image"`
	Isolation string           `json:"isolation"`
	Limits    Limits           `json:"limits"`
	Metrics   contract.Metrics `json:"metrics"`
	Status    contract.Status  `json:"status"`
	ExitCode  *int             `json:"exit_code"`
	Error     *Error           `json:"error,omitempty"`
	Artifacts []Artifact       `json:"artifacts"`
	// Network is every connection the run made or tried through the
	// proxy (host, port, verdict and rule, bytes, duration).
	Network []contract.Connection `json:"network,omitempty"`
	// Heads of the output, redacted; the hashes are of the whole streams,
	// for replay to compare.
	StdoutHead   string `json:"stdout_head"`
	StderrHead   string `json:"stderr_head"`
	StdoutSHA256 string `json:"stdout_sha256"`
	StderrSHA256 string `json:"stderr_sha256"`
	// Redacted counts the values replaced in this line.
	Redacted int `json:"redacted,omitempty"`
	// ToolCalls are the calls the run's code made to upstream servers.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Session is set for a call run in a session.
	Session *Session `json:"session,omitempty"`
	// Background is set for a run that went on after its call answered
	// (limits.answer_within_seconds): how it ended for its client,
	// waited (collected with run_wait), cancelled (run_cancel) or
	// abandoned (never collected).
	Background string `json:"background,omitempty"`
	// Exposure is set on the line of a connection to a session's
	// exposure (session_expose) instead of a run; RunID names the
	// exposure and the connection's number in it.
	Exposure *Exposure `json:"exposure,omitempty"`
}

// Exposure is one connection a person (or anyone) made to an exposure.
type Exposure struct {
	ID      string `json:"id"`
	BoxPort int    `json:"box_port"`
	Remote  string `json:"remote"`
	// Outcome is "served" or why the connection was refused.
	Outcome    string `json:"outcome"`
	Requests   int    `json:"requests"`
	BytesIn    int64  `json:"bytes_in"`
	BytesOut   int64  `json:"bytes_out"`
	DurationMs int64  `json:"duration_ms"`
}

// ToolCall is one call of the code to an upstream server's tool.
type ToolCall struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// ArgsHead is the head of the arguments, redacted.
	ArgsHead   string `json:"args_head"`
	DurationMs int64  `json:"duration_ms"`
	// Outcome is ok or the error kind the code saw.
	Outcome  string `json:"outcome"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
}

// Session names the session a call ran in. The id is a capability, so the
// log keeps its sha256 (the session box's label), never the id itself.
type Session struct {
	Key   string `json:"key"`
	Call  int    `json:"call"`
	State string `json:"state"`
}

// Client is who called.
type Client struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Session string `json:"session,omitempty"`
	// Principal is who called: the bearer token's name over HTTP.
	Principal string `json:"principal,omitempty"`
}

// Limits are the bounds the run had.
type Limits struct {
	TimeoutSeconds float64 `json:"timeout_seconds"`
	MemoryBytes    int64   `json:"memory_bytes"`
	CPUs           float64 `json:"cpus"`
	Pids           int64   `json:"pids"`
	OutputBytes    int64   `json:"max_output_bytes"`
}

// Error is the run's typed error, redacted.
type Error struct {
	Kind    contract.Kind  `json:"kind"`
	Limit   contract.Limit `json:"limit,omitempty"`
	Syscall string         `json:"syscall,omitempty"`
	Message string         `json:"message"`
}

// Artifact is a file's metadata, never its content.
type Artifact struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	MimeType  string `json:"mime_type"`
	SHA256    string `json:"sha256"`
}

// HeadBytes is how much of each stream a line keeps.
const HeadBytes = 1024

// Log appends entries to a file and rotates it by size.
type Log struct {
	mu   sync.Mutex
	path string
	max  int64
	keep int
	f    *os.File
	size int64
}

// DefaultPath is where the log goes when the manifest names no path.
func DefaultPath() string {
	return filepath.Join(StateDir(), "audit.jsonl")
}

// StateDir is runbox's state directory: $XDG_STATE_HOME/runbox, else
// ~/.local/state/runbox.
func StateDir() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "runbox")
}

// PathOf is the log file of a manifest.
func PathOf(a manifest.Audit) string {
	if a.Path != "" {
		return a.Path
	}
	return DefaultPath()
}

// Open opens (creating) the log of a manifest; nil when it is disabled.
func Open(a manifest.Audit) (*Log, error) {
	if !a.Enabled {
		return nil, nil
	}
	l := &Log{path: PathOf(a), max: int64(a.MaxBytes), keep: a.Keep}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	// The log is a state file: a FIFO there must not block the server
	// (rotation opens it under l.mu), nor a link send its lines elsewhere.
	f, err := statefile.Open(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Path is the file the log writes.
func (l *Log) Path() string { return l.path }

// Record appends one entry, rotating first when it would not fit.
func (l *Log) Record(e Entry) error {
	if l == nil {
		return nil
	}
	line, err := marshalEntry(&e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(line)) > l.max {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	return err
}

// rotate shifts path.N-1 → path.N ... path → path.1, dropping what is past
// keep, and starts an empty file.
func (l *Log) rotate() error {
	l.f.Close()
	for i := l.keep; i >= 1; i-- {
		from := l.path
		if i > 1 {
			from = l.path + "." + strconv.Itoa(i-1)
		}
		if err := os.Rename(from, l.path+"."+strconv.Itoa(i)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("audit log rotation: %w", err)
		}
	}
	if l.keep == 0 {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("audit log rotation: %w", err)
		}
	}
	return l.open()
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// Read returns the entries of the log at path and its rotated files,
// oldest first; lines that do not parse are skipped.
func Read(path string, keep int) ([]Entry, error) {
	var all []Entry
	found := false
	for i := keep; i >= 0; i-- {
		p := path
		if i > 0 {
			p = path + "." + strconv.Itoa(i)
		}
		f, err := statefile.Open(p, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 256*1024*1024)
		for sc.Scan() {
			var e Entry
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.RunID != "" {
				all = append(all, e)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if !found {
		return nil, fmt.Errorf("no audit log at %s", path)
	}
	return all, nil
}

// Find returns the entry of a run.
func Find(entries []Entry, runID string) (Entry, bool) {
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].RunID == runID {
			return entries[i], true
		}
	}
	return Entry{}, false
}
