package docker

import (
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

func TestFolderVolumeNamePerServerAndFolder(t *testing.T) {
	a := &Docker{owner: sandbox.Owner{Instance: "aaaa"}}
	b := &Docker{owner: sandbox.Owner{Instance: "bbbb"}}
	if a.folderVolumeName("/x") != a.folderVolumeName("/x") || a.folderVolumeName("/x") == a.folderVolumeName("/y") ||
		a.folderVolumeName("/x") == b.folderVolumeName("/x") || !strings.HasPrefix(a.folderVolumeName("/x"), "runbox-folder-aaaa-") {
		t.Fatal(a.folderVolumeName("/x"), b.folderVolumeName("/x"))
	}
}

func TestPodmanFoldersAsBinds(t *testing.T) {
	m := manifest.Default()
	m.Mounts = []manifest.Mount{{Name: "data", Path: "/srv/data"}}
	_, host := boxSpec(m, m.Languages[0], nil, "v", nil)
	host.Mounts = append(host.Mounts, extraMounts([]sandbox.HostMount{{Source: "/home/me/p", Target: "/mnt/roots/p"}})...)
	if err := podmanFolders(host); err != nil {
		t.Fatal(err)
	}
	want := []string{"/srv/data:/mnt/data:ro,nosuid,nodev,noexec,bind,rprivate", "/home/me/p:/mnt/roots/p:ro,nosuid,nodev,noexec,bind,rprivate"}
	if strings.Join(host.Binds, " ") != strings.Join(want, " ") || len(host.Mounts) != 1 || host.Mounts[0].Type != mount.TypeVolume {
		t.Fatalf("binds %v mounts %+v", host.Binds, host.Mounts)
	}
	bad := &container.HostConfig{Mounts: []mount.Mount{readOnlyBind("/a:b", "/mnt/x")}}
	if err := podmanFolders(bad); err == nil {
		t.Fatal("a path with ':' became a Binds entry")
	}
}
