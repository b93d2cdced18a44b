package sandbox

import "github.com/runbox-mcp/runbox/contract"

// HostMount is a host folder a box sees read-only at Target, beyond the
// manifest's declared folders: a client's MCP roots, which differ from
// one client to the next.
type HostMount struct {
	// Source is the host folder, links already resolved.
	Source string
	// Target is the folder's path in the box (/mnt/roots/<name>).
	Target string
	// URI is the root's URI as the client named it.
	URI string
}

// Roots says where mounts are in the box, as a result names them.
func Roots(mounts []HostMount) []contract.Root {
	if len(mounts) == 0 {
		return nil
	}
	out := make([]contract.Root, len(mounts))
	for i, hm := range mounts {
		out[i] = contract.Root{Path: hm.Target, URI: hm.URI}
	}
	return out
}
