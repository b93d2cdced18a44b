package oci

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/runbox-mcp/runbox/manifest"
)

// withWorkspace makes the box's /workspace the named workspace mounted at
// source on the host, in place of the tmpfs: a writable bind that runc
// remounts nosuid,nodev (as the host's mount is).
func withWorkspace(s *specs.Spec, source string) {
	if source == "" {
		return
	}
	for i, mt := range s.Mounts {
		if mt.Destination == manifest.Workspace {
			s.Mounts[i] = specs.Mount{Destination: manifest.Workspace, Type: "bind", Source: source,
				Options: []string{"bind", "rprivate", "nosuid", "nodev"}}
		}
	}
}
