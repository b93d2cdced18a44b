package oci

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/runbox-mcp/runbox/manifest"
)

// A named workspace is the box's one /workspace: a writable bind runc
// mounts nosuid,nodev, in place of the tmpfs.
func TestBoxSpecWorkspace(t *testing.T) {
	s := testSpec(t, nil, specParams{rootfs: "/r", initDir: "/i", cgroup: "/runbox/x", workspace: "/state/ws/k/w/mnt"})
	var at []specs.Mount
	for _, mt := range s.Mounts {
		if mt.Destination == manifest.Workspace {
			at = append(at, mt)
		}
	}
	if len(at) != 1 || at[0].Type != "bind" || at[0].Source != "/state/ws/k/w/mnt" ||
		!slices.Equal(at[0].Options, []string{"bind", "rprivate", "nosuid", "nodev"}) {
		t.Fatalf("/workspace: %+v", at)
	}
	s = testSpec(t, nil, specParams{rootfs: "/r", initDir: "/i", cgroup: "/runbox/x"})
	i := slices.IndexFunc(s.Mounts, func(mt specs.Mount) bool { return mt.Destination == manifest.Workspace })
	if i < 0 || s.Mounts[i].Type != "tmpfs" {
		t.Fatalf("without a workspace, /workspace: %+v", s.Mounts)
	}
}
