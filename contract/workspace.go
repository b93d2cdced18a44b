package contract

import (
	"fmt"
	"time"
)

// KindWorkspaceBusy refuses a session_open or workspace_delete of a
// workspace another session holds: one writer at a time.
const KindWorkspaceBusy Kind = "workspace_busy"

// WorkspaceInfo describes a named workspace: workspace_list's answer and
// session_open's.
type WorkspaceInfo struct {
	Name string `json:"name" jsonschema:"description=The workspace's name."`
	// BytesUsed counts what its file system holds, its own structures
	// included.
	BytesUsed int64     `json:"bytes_used" jsonschema:"description=Bytes its file system holds (its own structures included)."`
	Quota     int64     `json:"quota_bytes" jsonschema:"description=Its size: a write past it fails with ENOSPC."`
	LastUsed  time.Time `json:"last_used_at" jsonschema:"description=When a session last released it (or created it)."`
	InUse     bool      `json:"in_use" jsonschema:"description=A session holds it now."`
	// Note says what the backend cannot know of the workspace.
	Note string `json:"note,omitempty" jsonschema:"description=What this server's backend cannot tell of the workspace (e.g. bytes_used on kubernetes), when anything."`
}

// WorkspaceBusy refuses a workspace another session holds.
func WorkspaceBusy(name string) ErrorInfo {
	return ErrorInfo{Kind: KindWorkspaceBusy,
		Message: fmt.Sprintf("the workspace %q is in use by another open session (one session at a time)", name),
		Hint:    "Close the session that holds it (session_list shows yours), wait for it to expire, or use another workspace name."}
}

// WorkspacesFull refuses a new workspace past the per-client cap.
func WorkspacesFull(max int) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitDisk,
		Message: fmt.Sprintf("this client already keeps %d workspaces, the most allowed", max),
		Hint:    "Reuse one of your workspaces (workspace_list) or delete one you no longer need with workspace_delete."}
}

// NoWorkspace names no workspace of this caller.
func NoWorkspace(name string) ErrorInfo {
	return ErrorInfo{Kind: KindInvalidRequest, Message: fmt.Sprintf("you have no workspace named %q", name),
		Hint: "Use a name workspace_list shows; session_open with a new name creates one."}
}
