package docker

import (
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/runbox-mcp/runbox/manifest"
)

// withWorkspace gives the box the named workspace mounted at source on
// the host as its /workspace, in place of the tmpfs. The host's mount is
// nosuid,nodev, and a plain bind keeps its flags: neither runc nor runsc
// remounts a writable bind without options. Podman's API takes the
// flags in a Binds entry.
func withWorkspace(host *container.HostConfig, source string, podman bool) {
	if source == "" {
		return
	}
	delete(host.Tmpfs, manifest.Workspace)
	if podman {
		host.Binds = append(host.Binds, source+":"+manifest.Workspace+":rw,nosuid,nodev,bind,rprivate")
		return
	}
	host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: source, Target: manifest.Workspace,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate, NonRecursive: true}})
}
