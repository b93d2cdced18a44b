package manifest

import "regexp"

// Workspaces configures named workspaces: a persistent, writable
// /workspace per caller and name that a session may open, kept across
// sessions with a byte quota the file system enforces.
type Workspaces struct {
	Enabled bool `json:"enabled" jsonschema_description:"Offers session_open's workspace, workspace_list and workspace_delete. Each workspace is an ext4 image file on a loop device, mounted nosuid,nodev at the session's /workspace: the server must be able to mount (root on Linux). On the kubernetes backend each is a PersistentVolumeClaim instead (kubernetes.workspace_storage_class). Off by default."`
	// Quota is each workspace's size: writes past it fail in the box
	// with ENOSPC.
	Quota ByteSize `json:"quota" jsonschema_description:"Size of each workspace's file system; a write past it fails in the box with ENOSPC (the file system's own structures take a few MiB of it). On the kubernetes backend, each claim's requested storage, which its provisioner must enforce."`
	// MaxPerClient bounds how many workspaces one caller keeps.
	MaxPerClient int `json:"max_per_client" jsonschema_description:"Most workspaces one caller keeps (per bearer token over HTTP)."`
	// Dir is where they are kept; empty means the state directory.
	Dir string `json:"dir" jsonschema_description:"Where workspaces are kept, a directory per caller and name; empty: $XDG_STATE_HOME/runbox/workspaces (~/.local/state/runbox/workspaces). Unused on the kubernetes backend."`
}

// DefaultWorkspaces are the built-in workspace settings.
func DefaultWorkspaces() Workspaces {
	return Workspaces{Enabled: false, Quota: 256 * MiB, MaxPerClient: 8}
}

var workspaceNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ValidWorkspaceName says whether name may name a workspace: 1 to 32 of
// a-z, 0-9, '-' and '_', starting with a letter or digit.
func ValidWorkspaceName(name string) bool { return workspaceNameRe.MatchString(name) }

func (w Workspaces) validate(bad func(field string, value any, want string), rangeI func(string, int64, int64, int64), rangeB func(string, ByteSize, ByteSize, ByteSize)) {
	rangeB("workspaces.quota", w.Quota, 16*MiB, 1024*GiB)
	rangeI("workspaces.max_per_client", int64(w.MaxPerClient), 1, 1024)
	if w.Dir != "" && w.Dir[0] != '/' {
		bad("workspaces.dir", w.Dir, "an absolute path")
	}
}
