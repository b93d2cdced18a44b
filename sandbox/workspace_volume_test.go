package sandbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// fakeVolumeDriver keeps workspaces as in-memory volumes; a live session
// box labelled with one holds it, as on Kubernetes.
type fakeVolumeDriver struct {
	fakeSessionDriver
	vmu      sync.Mutex
	vols     map[WorkspaceRef]int64
	released map[WorkspaceRef]int
	specs    []BoxSpec
	busy     bool
}

func (d *fakeVolumeDriver) Start(ctx context.Context, spec BoxSpec) (Box, error) {
	d.vmu.Lock()
	d.specs = append(d.specs, spec)
	busy := d.busy
	d.vmu.Unlock()
	if busy {
		return nil, ErrWorkspaceBusy
	}
	return d.fakeSessionDriver.Start(ctx, spec)
}

func (d *fakeVolumeDriver) setBusy(busy bool) {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	d.busy = busy
}

func (d *fakeVolumeDriver) HasVolume(_ context.Context, ref WorkspaceRef) (bool, error) {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	_, ok := d.vols[ref]
	return ok, nil
}

func (d *fakeVolumeDriver) CreateVolume(_ context.Context, ref WorkspaceRef, quota int64) error {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	d.vols[ref] = quota
	return nil
}

func (d *fakeVolumeDriver) Volumes(ctx context.Context, client string) ([]contract.WorkspaceInfo, error) {
	d.vmu.Lock()
	var out []contract.WorkspaceInfo
	for ref, q := range d.vols {
		if ref.Client == client {
			out = append(out, contract.WorkspaceInfo{Name: ref.Name, Quota: q, Note: "not known"})
		}
	}
	d.vmu.Unlock()
	for i := range out {
		out[i].InUse, _ = d.VolumeHeld(ctx, WorkspaceRef{Client: client, Name: out[i].Name})
	}
	return out, nil
}

func (d *fakeVolumeDriver) VolumeHeld(ctx context.Context, ref WorkspaceRef) (bool, error) {
	found, err := d.FindBoxes(ctx, map[string]string{LabelWorkspace: ref.Name, LabelSessionClient: ref.Client})
	return len(found) > 0, err
}

func (d *fakeVolumeDriver) DeleteVolume(_ context.Context, ref WorkspaceRef) error {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	delete(d.vols, ref)
	return nil
}

func (d *fakeVolumeDriver) VolumeReleased(_ context.Context, ref WorkspaceRef) {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	d.released[ref]++
}

// On a driver that keeps volumes, a workspace is its volume: created at
// first use within the cap, handed to the box (no host mount), one
// session at a time, released when the box is gone, deleted when free;
// nothing on the host, no state directory needed.
func TestWorkspaceVolumes(t *testing.T) {
	ctx := context.Background()
	d := &fakeVolumeDriver{vols: map[WorkspaceRef]int64{}, released: map[WorkspaceRef]int{}}
	m := testManifest(t, func(m *manifest.Manifest) {
		m.Sessions.Enabled = true
		m.Backend = manifest.BackendKubernetes
		m.Workspaces = manifest.Workspaces{Enabled: true, Quota: 16 * manifest.MiB, MaxPerClient: 1}
	})
	r := New(d, Options{Manifest: m})
	r.grace = 300 * time.Millisecond
	t.Cleanup(func() { _ = r.Close() })
	lang, _ := m.Language("python")
	open := func(client, ws string) (contract.SessionInfo, *contract.ErrorInfo) {
		return r.OpenSession(ctx, SessionRequest{Language: lang, Client: client, Limits: m.SessionLimits(), Workspace: ws})
	}
	info, fail := open("alice", "w")
	if fail != nil || info.Workspace != "w" {
		t.Fatalf("open: %+v %+v", info, fail)
	}
	ref := WorkspaceRef{Client: clientKey("alice"), Name: "w"}
	spec := d.specs[0]
	if spec.Workspace != "" || spec.WorkspaceVolume == nil || *spec.WorkspaceVolume != ref || spec.Labels[LabelWorkspace] != "w" {
		t.Fatalf("the box's spec: workspace %q, volume %v, labels %v", spec.Workspace, spec.WorkspaceVolume, spec.Labels)
	}
	if d.vols[ref] != 16<<20 {
		t.Fatalf("volumes: %v", d.vols)
	}
	if _, fail := open("alice", "w"); fail == nil || fail.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("a second writer: %+v", fail)
	}
	if _, fail := open("alice", "other"); fail == nil || fail.Kind != contract.KindResourceLimit {
		t.Fatalf("past max_per_client: %+v", fail)
	}
	if list, fail := r.ListWorkspaces(ctx, "alice"); fail != nil || len(list) != 1 || !list[0].InUse || list[0].Note == "" {
		t.Fatalf("list: %+v %+v", list, fail)
	}
	if fail := r.DeleteWorkspace(ctx, "alice", "w"); fail == nil || fail.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("deleted in use: %+v", fail)
	}
	if fail := r.CloseSession(ctx, info.ID, "alice"); fail != nil {
		t.Fatal(fail)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.vmu.Lock()
		n := d.released[ref]
		d.vmu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released %d times", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Two servers opened it at once, and the driver says so.
	d.setBusy(true)
	if _, fail := open("alice", "w"); fail == nil || fail.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("the driver's busy: %+v", fail)
	}
	d.setBusy(false)
	if fail := r.DeleteWorkspace(ctx, "alice", "w"); fail != nil {
		t.Fatal(fail)
	}
	if fail := r.DeleteWorkspace(ctx, "alice", "w"); fail == nil || fail.Kind != contract.KindInvalidRequest {
		t.Fatalf("deleted twice: %+v", fail)
	}
	if list, _ := r.ListWorkspaces(ctx, "alice"); len(list) != 0 {
		t.Fatalf("listed after delete: %+v", list)
	}
}
