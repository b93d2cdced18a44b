package docker

import (
	"testing"

	"github.com/moby/moby/api/types/mount"

	"github.com/runbox-mcp/runbox/manifest"
)

// A named workspace replaces the /workspace tmpfs by a plain writable
// bind (which keeps the host mount's nosuid,nodev); Podman's is a Binds
// entry that says them; without one nothing changes.
func TestWithWorkspace(t *testing.T) {
	m := manifest.Default()
	lang, _ := m.Language("python")
	_, host := boxSpec(m, lang, nil, "vol", nil)
	withWorkspace(host, "", false)
	if _, ok := host.Tmpfs[manifest.Workspace]; !ok {
		t.Fatal("no workspace, yet the tmpfs went")
	}
	n := len(host.Mounts)
	withWorkspace(host, "/state/ws/k/w/mnt", false)
	if _, ok := host.Tmpfs[manifest.Workspace]; ok {
		t.Fatal("the tmpfs is still at /workspace")
	}
	if len(host.Mounts) != n+1 {
		t.Fatalf("mounts %+v", host.Mounts)
	}
	got := host.Mounts[n]
	if got.Type != mount.TypeBind || got.Source != "/state/ws/k/w/mnt" || got.Target != manifest.Workspace || got.ReadOnly ||
		got.BindOptions == nil || !got.BindOptions.NonRecursive || got.BindOptions.Propagation != mount.PropagationRPrivate {
		t.Fatalf("the workspace's mount: %+v", got)
	}
	_, host = boxSpec(m, lang, nil, "vol", nil)
	withWorkspace(host, "/state/ws/k/w/mnt", true)
	if len(host.Binds) != 1 || host.Binds[0] != "/state/ws/k/w/mnt:/workspace:rw,nosuid,nodev,bind,rprivate" {
		t.Fatalf("podman's binds: %v", host.Binds)
	}
}
