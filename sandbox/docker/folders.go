package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// A folder (declared, or a client's root) reaches a box as a volume of
// the engine's local driver that binds it: the driver mounts it on the
// host with folderOpts, remounting the bind to apply them, which an engine
// bind mount cannot (Docker 20.10's API has no nosuid, nodev or noexec for
// a bind, and runc's read-only remount of a bind clears them). The box's
// mount of the volume is then a bind of that mount and inherits all of
// them: read-only, nosuid, nodev, noexec; private, so no mount the host
// makes later under the folder reaches the box; non-recursive, so none it
// had does either.
//
// The volumes are this server's (named and labelled for its instance):
// created on a box's start (idempotent: the same call finds an existing
// one), removed at Close, and reaped, once unused, when their server is
// gone. A volume a box uses cannot be removed, so a session box that
// outlives its server keeps its folders.
const folderOpts = "bind,ro,nosuid,nodev,noexec,private"

// folderVolumeName names the volume of source for this server.
func (d *Docker) folderVolumeName(source string) string {
	h := sha256.Sum256([]byte(source + "\x00" + folderOpts))
	return "runbox-folder-" + d.owner.Instance + "-" + hex.EncodeToString(h[:8])
}

// withFolderVolumes replaces the host config's folder binds by their
// volumes. Under runc the box's mount is not marked read-only: runc would
// remount it MS_RDONLY alone, clearing the volume's nosuid, nodev and
// noexec, while a plain bind of the read-only volume is read-only all the
// same. runsc has no such remount, and shows the mount read-only.
func (d *Docker) withFolderVolumes(ctx context.Context, host *container.HostConfig) error {
	for i, mt := range host.Mounts {
		if mt.Type != mount.TypeBind {
			continue
		}
		name, err := d.ensureFolderVolume(ctx, mt.Source)
		if err != nil {
			return err
		}
		host.Mounts[i] = mount.Mount{Type: mount.TypeVolume, Source: name, Target: mt.Target,
			ReadOnly:      d.m.Isolation == manifest.IsolationGVisor,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
	}
	return nil
}

func (d *Docker) ensureFolderVolume(ctx context.Context, source string) (string, error) {
	name := d.folderVolumeName(source)
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := d.cli.VolumeCreate(actx, client.VolumeCreateOptions{Name: name, Driver: "local",
		DriverOpts: map[string]string{"type": "none", "device": source, "o": folderOpts},
		Labels:     d.owner.Labels(map[string]string{sandbox.LabelFolder: source})})
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.folderVolumes[name] = true
	d.mu.Unlock()
	return name, nil
}

// removeFolderVolumes removes this server's folder volumes that no box
// uses, at Close.
func (d *Docker) removeFolderVolumes() {
	d.mu.Lock()
	names := slices.Collect(maps.Keys(d.folderVolumes))
	d.mu.Unlock()
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		_, err := d.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Debug("folder volume kept (in use, or the engine is away): the reaper removes it", "volume", name, "err", err)
		}
	}
}

// folderVolumeAge is how old a folder volume of a server on another host
// sharing the engine must be before it may go (when unused): that server
// makes it again at its next box's start.
const folderVolumeAge = 24 * time.Hour

// reapFolderVolumes removes the folder volumes no box uses whose server is
// gone; the engine refuses to remove one a box (even a stopped one) uses.
func (d *Docker) reapFolderVolumes(ctx context.Context) int {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := d.cli.VolumeList(actx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", sandbox.LabelFolder)})
	if err != nil {
		return 0
	}
	removed := 0
	for _, v := range list.Items {
		alive, known := sandbox.OwnerAlive(v.Labels, d.owner)
		if alive {
			continue
		}
		if t, err := time.Parse(time.RFC3339, v.CreatedAt); !known && (err != nil || time.Since(t) < folderVolumeAge) {
			continue
		}
		if d.folderVolumeInUse(actx, v.Name) {
			continue // a session box that outlived its server
		}
		// The box that used it may still be on its way out (a removal
		// its dead server asked for, still in progress): give it a moment.
		for try := 0; ; try++ {
			_, err := d.cli.VolumeRemove(actx, v.Name, client.VolumeRemoveOptions{})
			if err == nil {
				removed++
				d.log.Info("reaped a leftover folder volume", "volume", v.Name)
			}
			if err == nil || !cerrdefs.IsConflict(err) || try == 10 || actx.Err() != nil {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return removed
}

// folderVolumeInUse says whether a running box mounts volume name.
func (d *Docker) folderVolumeInUse(ctx context.Context, name string) bool {
	list, err := d.cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("volume", name).Add("status", "running")})
	return err != nil || len(list.Items) > 0
}
