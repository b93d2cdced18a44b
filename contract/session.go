package contract

import (
	"fmt"
	"time"
)

// Error kinds of sessions: a session whose state is gone, and an id that
// names no session this caller may use.
const (
	KindSessionLost     Kind = "session_lost"
	KindSessionNotFound Kind = "session_not_found"
)

// Session states told in a result.
const (
	SessionAlive = "alive"
	SessionLost  = "lost"
)

// SessionRef is what a result run in a session says of it.
type SessionRef struct {
	ID string `json:"id" jsonschema:"description=The session the call ran in."`
	// Call is the call's number in the session, from 1.
	Call  int    `json:"call" jsonschema:"description=The call's number in the session, from 1."`
	State string `json:"state" jsonschema:"enum=alive,enum=lost,description=alive: the interpreter and its state live on; lost: they are gone (see lost_reason)."`
	// LostReason says why the state is gone.
	LostReason string    `json:"lost_reason,omitempty" jsonschema:"description=Why the session's state is gone."`
	ExpiresAt  time.Time `json:"expires_at" jsonschema:"description=When the session ends unless used again (idle TTL) or at its maximum lifetime, whichever comes first."`
}

// SessionGone is a call on a session whose interpreter is gone.
func SessionGone(why string) ErrorInfo {
	return ErrorInfo{Kind: KindSessionLost, Message: "the session's state is gone: " + FirstLine(why),
		Hint: "Open a new session with session_open and re-run your set-up code (imports, loaded data) in it."}
}

// NoSession is an id that names no open session of this caller.
func NoSession() ErrorInfo {
	return ErrorInfo{Kind: KindSessionNotFound, Message: "no open session has this id for this client (unknown, closed or expired)",
		Hint: "Use a session_id that session_open returned to you and that session_list still shows, or open a new one."}
}

// SessionsFull refuses a session past the per-client or per-server cap.
func SessionsFull(who string, max int) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitBusy,
		Message: fmt.Sprintf("%s already has %d open sessions, the most allowed", who, max),
		Hint:    "Close a session you no longer need with session_close, or run this code without a session."}
}

// LostHint is added to the hint of a call that lost its session.
const LostHint = " The session's interpreter was killed, so its state is gone: open a new session and re-run the set-up code."

// SessionInfo describes an open session: session_open's and
// session_list's answer.
type SessionInfo struct {
	ID        string        `json:"session_id"`
	Language  string        `json:"language"`
	Calls     int           `json:"calls"`
	OpenedAt  time.Time     `json:"opened_at"`
	LastUsed  time.Time     `json:"last_used_at"`
	IdleTTL   float64       `json:"idle_ttl_seconds"`
	ExpiresAt time.Time     `json:"expires_at"`
	EndsAt    time.Time     `json:"max_lifetime_ends_at"`
	Limits    SessionLimits `json:"limits"`
	// Roots are the client's roots mounted in the session's box when it
	// opened; a restarted server does not know them.
	Roots []Root `json:"roots,omitempty"`
	// Workspace names the caller's named workspace the session holds as
	// /workspace.
	Workspace string `json:"workspace,omitempty" jsonschema:"description=Your named workspace: the session's /workspace (kept after it)."`
	// Running names the run of the cell the session is busy with, when a
	// cell runs: a new call waits for it (a restarted server that adopted
	// the cell its predecessor sent knows it too).
	Running string `json:"running_run_id,omitempty" jsonschema:"description=The run of the cell the session is busy with; a new call waits for it."`
	// Exposures are the session's open previews (session_expose) that
	// belong to the caller; none on a server without them.
	Exposures []SessionExposure `json:"exposures,omitempty" jsonschema:"description=The session's web servers open to the person (session_expose): give them the URL."`
}

// SessionExposure names one open exposure of a session where the session
// is described: enough for the agent to hand the person the URL again.
type SessionExposure struct {
	ID      string `json:"id" jsonschema:"description=The exposure's id: session_unexpose closes it."`
	Name    string `json:"name,omitempty"`
	BoxPort int    `json:"box_port"`
	URL     string `json:"url" jsonschema:"description=What the person opens: it carries the exposure's token."`
}

// SessionLimits are the limits a session runs under.
type SessionLimits struct {
	Memory         int64   `json:"memory_bytes"`
	Pids           int64   `json:"pids"`
	WorkspaceBytes int64   `json:"workspace_bytes"`
	CPUs           float64 `json:"cpus"`
}
