package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// VolumeDriver is a Driver that keeps named workspaces as volumes of its
// own platform (Kubernetes: a PersistentVolumeClaim each) instead of as
// ext4 images on the server's host; the platform's volume enforces the
// quota. The platform is the truth of which workspace is in use: a box
// that holds one carries [LabelWorkspace] and [LabelSessionClient].
type VolumeDriver interface {
	// HasVolume says whether ref's volume exists.
	HasVolume(ctx context.Context, ref WorkspaceRef) (bool, error)
	// CreateVolume makes ref's volume, of quota bytes.
	CreateVolume(ctx context.Context, ref WorkspaceRef, quota int64) error
	// Volumes describes the volumes of a caller (its [WorkspaceRef].Client),
	// as well as the platform can; what it cannot know, Note says.
	Volumes(ctx context.Context, client string) ([]contract.WorkspaceInfo, error)
	// VolumeHeld says whether a box not yet gone holds ref's volume.
	VolumeHeld(ctx context.Context, ref WorkspaceRef) (bool, error)
	// DeleteVolume deletes ref's volume and everything in it.
	DeleteVolume(ctx context.Context, ref WorkspaceRef) error
	// VolumeReleased records that the box that held ref's volume is gone:
	// the workspace's last use.
	VolumeReleased(ctx context.Context, ref WorkspaceRef)
}

// WorkspaceRef names one caller's workspace on a [VolumeDriver].
type WorkspaceRef struct {
	// Client is the caller's key (the sha256 [LabelSessionClient] carries).
	Client string
	Name   string
}

// ErrWorkspaceBusy is a [Driver.Start] that found another box holding
// the box's workspace volume, which two servers opened at once: the box
// was not started.
var ErrWorkspaceBusy = errors.New("another box holds the workspace")

// volumeCall bounds a volume call made after the caller's context ended
// (the release of a session's workspace).
const volumeCall = 15 * time.Second

// acquireVolume claims h's workspace on the driver's platform, creating
// its volume if it is new. fail drops the claim.
func (w *workspaces) acquireVolume(ctx context.Context, h *heldWorkspace) (*heldWorkspace, *contract.ErrorInfo) {
	ref := WorkspaceRef{Client: clientKey(h.client), Name: h.name}
	fail := func(e *contract.ErrorInfo) (*heldWorkspace, *contract.ErrorInfo) {
		h.drop()
		return nil, e
	}
	if busy, err := w.vol.VolumeHeld(ctx, ref); err != nil {
		return fail(engineFail(contract.Job{}, err).Error)
	} else if busy {
		return fail(ptr(contract.WorkspaceBusy(h.name)))
	}
	has, err := w.vol.HasVolume(ctx, ref)
	if err != nil {
		return fail(engineFail(contract.Job{}, err).Error)
	}
	if !has {
		vols, err := w.vol.Volumes(ctx, ref.Client)
		if err != nil {
			return fail(engineFail(contract.Job{}, err).Error)
		}
		if len(vols) >= w.r.m.Workspaces.MaxPerClient {
			return fail(ptr(contract.WorkspacesFull(w.r.m.Workspaces.MaxPerClient)))
		}
		if err := w.vol.CreateVolume(ctx, ref, int64(w.r.m.Workspaces.Quota)); err != nil {
			return fail(engineFail(contract.Job{}, err).Error)
		}
	}
	h.ref = &ref
	return h, nil
}

// listVolumes is client's workspaces as the platform knows them; the
// ones this server's sessions are opening are in use too.
func (w *workspaces) listVolumes(ctx context.Context, client string) ([]contract.WorkspaceInfo, *contract.ErrorInfo) {
	vols, err := w.vol.Volumes(ctx, clientKey(client))
	if err != nil {
		return nil, engineFail(contract.Job{}, err).Error
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range vols {
		vols[i].InUse = vols[i].InUse || w.held[workspaceKey(client, vols[i].Name)] != nil
	}
	return vols, nil
}

// removeVolume deletes client's workspace name's volume, refused while a
// box holds it.
func (w *workspaces) removeVolume(ctx context.Context, h *heldWorkspace) *contract.ErrorInfo {
	ref := WorkspaceRef{Client: clientKey(h.client), Name: h.name}
	has, err := w.vol.HasVolume(ctx, ref)
	if err != nil {
		return engineFail(contract.Job{}, err).Error
	}
	if !has {
		return ptr(contract.NoWorkspace(h.name))
	}
	if busy, err := w.vol.VolumeHeld(ctx, ref); err != nil {
		return engineFail(contract.Job{}, err).Error
	} else if busy {
		return ptr(contract.WorkspaceBusy(h.name))
	}
	if err := w.vol.DeleteVolume(ctx, ref); err != nil {
		return engineFail(contract.Job{}, err).Error
	}
	return nil
}

// volumeOrNone is the volume h holds on the driver's platform, nil
// without one.
func (h *heldWorkspace) volumeOrNone() *WorkspaceRef {
	if h == nil {
		return nil
	}
	return h.ref
}
