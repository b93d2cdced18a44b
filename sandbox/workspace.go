package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/ext4img"
	"github.com/runbox-mcp/runbox/internal/statefile"
	"github.com/runbox-mcp/runbox/manifest"
)

// LabelWorkspace marks a session box that holds a named workspace, with
// the workspace's name; [LabelSessionClient] names its caller. The engine's
// running boxes are the truth of which workspace is in use: a box outlives
// a server killed with SIGKILL, and holds its workspace as long as it runs.
const LabelWorkspace = "io.runbox.workspace"

// Files of a workspace's directory, <dir>/<client key>/<name>/.
const (
	workspaceImage = "disk.img"
	workspaceMount = "mnt"
)

// workspaces are a runner's named workspaces: an ext4 image file each,
// attached to a loop device and mounted nosuid,nodev on the host while a
// session holds it, bound at the session box's /workspace. The kernel's
// file system enforces the quota (a write past it is ENOSPC in the box), on
// every runtime that binds a host folder: runc, gVisor (whose gofer writes
// through the host's file system), Podman and oci.
type workspaces struct {
	r   *BoxRunner
	dir string
	// vol is the driver when it keeps workspaces as its platform's
	// volumes (workspace_volume.go): then none is on this host.
	vol VolumeDriver
	mu  sync.Mutex
	// held are the workspaces this server's sessions hold or are opening,
	// by key; boxes maps a holding box's id to its key.
	held  map[string]*heldWorkspace
	boxes map[string]string
}

// heldWorkspace is a workspace a session holds, mounted.
type heldWorkspace struct {
	w            *workspaces
	key          string
	client, name string
	path         string
	// lock is the directory's flock, held while a session opens, so two
	// servers sharing the directory cannot both start a box on it.
	lock *os.File
	// ref is the workspace's volume on a [VolumeDriver]'s platform.
	ref *WorkspaceRef
}

// workspacesOf is the runner's workspaces, in Options.Workspaces.
func (r *BoxRunner) workspacesOf() *workspaces {
	r.wsOnce.Do(func() {
		vol, _ := r.d.(VolumeDriver)
		r.ws = &workspaces{r: r, dir: r.wsDir, vol: vol, held: map[string]*heldWorkspace{}, boxes: map[string]string{}}
	})
	return r.ws
}

func workspaceKey(client, name string) string { return clientKey(client) + "/" + name }

func (w *workspaces) clientDir(client string) string { return filepath.Join(w.dir, clientKey(client)) }

// usable says why workspaces cannot be used here, or "".
func (w *workspaces) usable() string {
	switch {
	case !w.r.m.Workspaces.Enabled:
		return "named workspaces are off on this server (manifest workspaces.enabled)"
	case w.vol != nil:
		return ""
	case w.dir == "":
		return "this server keeps no workspaces (no state directory)"
	case w.r.m.Backend == manifest.BackendKubernetes:
		return "named workspaces on the kubernetes backend need its driver to keep them as volumes, and this one keeps none"
	}
	return ""
}

// acquire claims client's workspace name for a session about to start,
// creating it if it is new, and mounts it. The caller starts the box
// labelled with it, then calls started (the box is up, or failed to start:
// release).
func (w *workspaces) acquire(ctx context.Context, client, name string) (*heldWorkspace, *contract.ErrorInfo) {
	if why := w.usable(); why != "" {
		return nil, ptr(contract.Invalid("%s", why))
	}
	if !manifest.ValidWorkspaceName(name) {
		return nil, ptr(contract.Invalid("workspace %q is not a valid name: 1 to 32 of a-z, 0-9, '-' and '_', starting with a letter or digit", name))
	}
	key := workspaceKey(client, name)
	h := &heldWorkspace{w: w, key: key, client: client, name: name, path: filepath.Join(w.clientDir(client), name)}
	w.mu.Lock()
	if w.held[key] != nil {
		w.mu.Unlock()
		return nil, ptr(contract.WorkspaceBusy(name))
	}
	w.held[key] = h
	w.mu.Unlock()
	if w.vol != nil {
		return w.acquireVolume(ctx, h)
	}
	fail := func(e contract.ErrorInfo) (*heldWorkspace, *contract.ErrorInfo) {
		h.drop()
		return nil, &e
	}
	if err := os.MkdirAll(w.clientDir(client), 0o700); err != nil {
		return fail(workspaceFail(err))
	}
	lock, err := lockWorkspace(filepath.Join(w.clientDir(client), "."+name+".lock"))
	if err != nil {
		return fail(workspaceFail(err))
	}
	if lock == nil {
		return fail(contract.WorkspaceBusy(name))
	}
	h.lock = lock
	if busy, err := w.boxHolds(ctx, client, name); err != nil {
		return fail(*engineFail(contract.Job{}, err).Error)
	} else if busy {
		return fail(contract.WorkspaceBusy(name))
	}
	if _, err := os.Lstat(h.path); errors.Is(err, os.ErrNotExist) {
		if n := len(w.names(client)); n >= w.r.m.Workspaces.MaxPerClient {
			return fail(contract.WorkspacesFull(w.r.m.Workspaces.MaxPerClient))
		}
		if err := w.create(ctx, h.path); err != nil {
			return fail(workspaceFail(err))
		}
	}
	if e := h.mount(ctx); e != nil {
		return fail(*e)
	}
	return h, nil
}

// started ends the opening: the box holding the workspace runs (boxID), so
// the engine now says it is in use.
func (h *heldWorkspace) started(boxID string) {
	h.w.mu.Lock()
	h.w.boxes[boxID] = h.key
	h.w.mu.Unlock()
	h.unlock()
}

func (h *heldWorkspace) unlock() {
	if h.lock != nil {
		h.lock.Close()
		h.lock = nil
	}
}

// drop forgets the claim, the workspace left as it is.
func (h *heldWorkspace) drop() {
	h.unlock()
	h.w.mu.Lock()
	if h.w.held[h.key] == h {
		delete(h.w.held, h.key)
	}
	h.w.mu.Unlock()
}

// release unmounts the workspace once its box is gone (its loop device
// goes with the last mount) and forgets the claim.
func (h *heldWorkspace) release() {
	if h.ref != nil {
		ctx, cancel := context.WithTimeout(context.Background(), volumeCall)
		h.w.vol.VolumeReleased(ctx, *h.ref)
		cancel()
		h.drop()
		return
	}
	if err := unmountWorkspace(filepath.Join(h.path, workspaceMount)); err != nil {
		h.w.r.log.Warn("workspace not unmounted", "workspace", h.name, "err", err)
	}
	// The kernel lets go of the loop device a moment after the last
	// mount: the claim lasts until it has, so the next session finds the
	// image free.
	if !detached(filepath.Join(h.path, workspaceImage), loopWait) {
		h.w.r.log.Warn("workspace's loop device still attached", "workspace", h.name)
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(h.path, workspaceImage), now, now)
	h.drop()
}

// mountPoint is where the workspace is mounted on the host.
func (h *heldWorkspace) mountPoint() string { return filepath.Join(h.path, workspaceMount) }

// adopted takes over the claim of a session box this server adopted: its
// workspace was mounted by the server that started it.
func (w *workspaces) adopted(boxID string, labels map[string]string, client string) {
	name := labels[LabelWorkspace]
	if name == "" || !manifest.ValidWorkspaceName(name) || w.dir == "" && w.vol == nil {
		return
	}
	h := &heldWorkspace{w: w, key: workspaceKey(client, name), client: client, name: name, path: filepath.Join(w.clientDir(client), name)}
	if w.vol != nil {
		h.ref = &WorkspaceRef{Client: clientKey(client), Name: name}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[h.key] == nil {
		w.held[h.key] = h
	}
	w.boxes[boxID] = h.key
}

// boxGone releases the workspace box held, if any: the box was killed
// and removed.
func (w *workspaces) boxGone(boxID string) {
	w.mu.Lock()
	key, ok := w.boxes[boxID]
	delete(w.boxes, boxID)
	h := w.held[key]
	w.mu.Unlock()
	if ok && h != nil {
		h.release()
	}
}

// boxHolds asks the platform whether a running session box holds the
// workspace.
func (w *workspaces) boxHolds(ctx context.Context, client, name string) (bool, error) {
	found, err := w.r.d.FindBoxes(ctx, map[string]string{LabelWorkspace: name, LabelSessionClient: clientKey(client)})
	return len(found) > 0, err
}

// create makes a new workspace: a sparse image file of the quota's size
// with an ext4 file system whose root the box's user owns.
func (w *workspaces) create(ctx context.Context, path string) error {
	if err := os.Mkdir(path, 0o700); err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(path)
		}
	}()
	if err := os.Mkdir(filepath.Join(path, workspaceMount), 0o700); err != nil {
		return err
	}
	uid, gid := boxUser(w.r.m.User)
	// The root is the box user's, and nothing else is in it.
	if err := ext4img.Make(ctx, filepath.Join(path, workspaceImage), int64(w.r.m.Workspaces.Quota), uid, gid); err != nil {
		return err
	}
	ok = true
	return nil
}

// mount mounts the workspace's image, nosuid,nodev, at its mount point.
// A mount left by a server that died is taken down first (no box holds
// it: acquire asked); an image still attached to a loop device after
// that is held by a box being removed, and refused as busy rather than
// mounted twice.
func (h *heldWorkspace) mount(ctx context.Context) *contract.ErrorInfo {
	mp, img := h.mountPoint(), filepath.Join(h.path, workspaceImage)
	// The state directory is read as untrusted: a link in place of the
	// workspace, its image or its mount point is never followed.
	for _, p := range []string{h.path, mp} {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			return ptr(workspaceFail(fmt.Errorf("%s is missing or not a directory", p)))
		}
	}
	if fi, err := os.Lstat(img); err != nil || !fi.Mode().IsRegular() {
		return ptr(workspaceFail(fmt.Errorf("the workspace's image is missing or not a regular file")))
	}
	if mounted(mp) {
		if err := unmountWorkspace(mp); err != nil {
			return ptr(workspaceFail(err))
		}
	}
	if !detached(img, loopWait) {
		return ptr(contract.WorkspaceBusy(h.name))
	}
	if err := ext4img.Mount(ctx, img, mp); err != nil {
		return ptr(workspaceFail(err))
	}
	return nil
}

// list is client's workspaces, by name.
func (w *workspaces) list(ctx context.Context, client string) ([]contract.WorkspaceInfo, *contract.ErrorInfo) {
	if why := w.usable(); why != "" {
		return nil, ptr(contract.Invalid("%s", why))
	}
	if w.vol != nil {
		return w.listVolumes(ctx, client)
	}
	inUse := map[string]bool{}
	found, err := w.r.d.FindBoxes(ctx, map[string]string{LabelWorkspace: "", LabelSessionClient: clientKey(client)})
	if err != nil {
		return nil, engineFail(contract.Job{}, err).Error
	}
	for _, b := range found {
		inUse[b.Labels[LabelWorkspace]] = true
	}
	out := []contract.WorkspaceInfo{}
	for _, name := range w.names(client) {
		path := filepath.Join(w.clientDir(client), name)
		fi, err := os.Lstat(filepath.Join(path, workspaceImage))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		w.mu.Lock()
		held := w.held[workspaceKey(client, name)] != nil
		w.mu.Unlock()
		if !held && !inUse[name] {
			w.takeDownStale(ctx, client, name)
		}
		info := contract.WorkspaceInfo{Name: name, Quota: fi.Size(), LastUsed: fi.ModTime().UTC(), InUse: held || inUse[name]}
		info.BytesUsed = bytesUsed(path, fi.Size())
		out = append(out, info)
	}
	return out, nil
}

// takeDownStale unmounts a workspace no box holds that a server which died
// left mounted, under the workspace's flock (an opening elsewhere keeps
// it).
func (w *workspaces) takeDownStale(ctx context.Context, client, name string) {
	mp := filepath.Join(w.clientDir(client), name, workspaceMount)
	if !mounted(mp) {
		return
	}
	lock, err := lockWorkspace(filepath.Join(w.clientDir(client), "."+name+".lock"))
	if err != nil || lock == nil {
		return
	}
	defer lock.Close()
	// Asked again under the lock: a session may have opened it since.
	w.mu.Lock()
	held := w.held[workspaceKey(client, name)] != nil
	w.mu.Unlock()
	if busy, err := w.boxHolds(ctx, client, name); held || busy || err != nil {
		return
	}
	if err := unmountWorkspace(mp); err != nil {
		w.r.log.Warn("a stale workspace mount stays", "workspace", name, "err", err)
	}
}

// remove deletes client's workspace name, refused while a session holds it.
func (w *workspaces) remove(ctx context.Context, client, name string) *contract.ErrorInfo {
	if why := w.usable(); why != "" {
		return ptr(contract.Invalid("%s", why))
	}
	if !manifest.ValidWorkspaceName(name) {
		return ptr(contract.NoWorkspace(name))
	}
	path := filepath.Join(w.clientDir(client), name)
	if w.vol == nil {
		if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
			return ptr(contract.NoWorkspace(name))
		}
	}
	key := workspaceKey(client, name)
	h := &heldWorkspace{w: w, key: key, client: client, name: name, path: path}
	w.mu.Lock()
	if w.held[key] != nil {
		w.mu.Unlock()
		return ptr(contract.WorkspaceBusy(name))
	}
	w.held[key] = h
	w.mu.Unlock()
	defer h.drop()
	if w.vol != nil {
		return w.removeVolume(ctx, h)
	}
	lock, err := lockWorkspace(filepath.Join(w.clientDir(client), "."+name+".lock"))
	if err != nil {
		return ptr(workspaceFail(err))
	}
	if lock == nil {
		return ptr(contract.WorkspaceBusy(name))
	}
	h.lock = lock
	if busy, err := w.boxHolds(ctx, client, name); err != nil {
		return engineFail(contract.Job{}, err).Error
	} else if busy {
		return ptr(contract.WorkspaceBusy(name))
	}
	if mounted(h.mountPoint()) {
		if err := unmountWorkspace(h.mountPoint()); err != nil {
			return ptr(workspaceFail(err))
		}
	}
	if !detached(filepath.Join(path, workspaceImage), loopWait) {
		return ptr(contract.WorkspaceBusy(name))
	}
	if err := os.RemoveAll(path); err != nil {
		return ptr(workspaceFail(err))
	}
	_ = os.Remove(filepath.Join(w.clientDir(client), "."+name+".lock"))
	return nil
}

// names are client's workspaces' names, sorted: the directories of valid
// names (anything else in the state directory is not one).
func (w *workspaces) names(client string) []string {
	ents, err := os.ReadDir(w.clientDir(client))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && manifest.ValidWorkspaceName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// bytesUsed is what the workspace's file system holds: the quota less its
// free blocks, from statfs while it is mounted here, else from the
// image's superblock (read as untrusted input, bounded).
func bytesUsed(path string, quota int64) int64 {
	if free, ok := statfsFree(filepath.Join(path, workspaceMount)); ok {
		return max(quota-free, 0)
	}
	f, err := statefile.Open(filepath.Join(path, workspaceImage), os.O_RDONLY, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	return max(quota-ext4Free(f), 0)
}

// ext4Free reads the free bytes an ext4 superblock records (at byte
// 1024): free blocks times the block size; 0 when it is not one.
func ext4Free(r io.ReaderAt) int64 {
	sb := make([]byte, 64)
	if _, err := r.ReadAt(sb, 1024); err != nil {
		return 0
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != 0xEF53 {
		return 0
	}
	logBS := le.Uint32(sb[0x18:])
	if logBS > 6 {
		return 0
	}
	return int64(le.Uint32(sb[0x0C:])) * (1024 << logBS)
}

// boxUser is the manifest's "uid:gid" as numbers (nobody's when it is
// not).
func boxUser(user string) (uid, gid int) {
	u, g, _ := strings.Cut(user, ":")
	uid, gid = 65534, 65534
	fmt.Sscanf(u, "%d", &uid)
	if g != "" {
		fmt.Sscanf(g, "%d", &gid)
	} else {
		gid = uid
	}
	return uid, gid
}

// The host's side of a workspace: its image, loop device and mount.
var (
	mounted          = ext4img.Mounted
	unmountWorkspace = ext4img.Unmount
	attached         = ext4img.Attached
	detached         = ext4img.Detached
)

// loopWait is how long a loop device may take to let go of an image
// after its last mount ended.
const loopWait = 5 * time.Second

func workspaceFail(err error) contract.ErrorInfo {
	return contract.ErrorInfo{Kind: contract.KindSandbox, Message: "the workspace could not be prepared: " + contract.FirstLine(err.Error()),
		Hint: "Retry once; if it persists, the operator should check that runbox can mount loop devices (root on Linux) and the workspaces' directory."}
}

// holdWorkspace acquires req's workspace, if it names one, and labels the
// session's box with it; nil, nil when it names none.
func (r *BoxRunner) holdWorkspace(ctx context.Context, req SessionRequest, labels map[string]string) (*heldWorkspace, *contract.ErrorInfo) {
	if req.Workspace == "" {
		return nil, nil
	}
	h, fail := r.workspacesOf().acquire(ctx, req.Client, req.Workspace)
	if fail != nil {
		return nil, fail
	}
	labels[LabelWorkspace] = req.Workspace
	return h, nil
}

// mountPointOrNone is where h is mounted on the host, "" without one.
func (h *heldWorkspace) mountPointOrNone() string {
	if h == nil || h.ref != nil {
		return ""
	}
	return h.mountPoint()
}

// startedOrReleased ends the opening: b holds the workspace, or, when no
// box started, the workspace is released at once.
func (h *heldWorkspace) startedOrReleased(b Box) {
	switch {
	case h == nil:
	case b == nil:
		h.release()
	default:
		h.started(b.ID())
	}
}

// removeSessionBox removes an ended session's box in the background, then
// releases its workspace: never while a box may still write to it.
func (r *BoxRunner) removeSessionBox(b Box) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		b.Remove()
		r.alive.Add(-1)
		r.workspacesOf().boxGone(b.ID())
	}()
}

// workspaceEnv points a session's user installs into its workspace:
// pip install --user under /workspace/.local (its scripts on PATH), npm
// install into /workspace/node_modules as it is the working directory.
func workspaceEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + v + ":" + WorkspaceUserBase + "/bin"
		}
		out = append(out, kv)
	}
	out = append(out, "PYTHONUSERBASE="+WorkspaceUserBase)
	sort.Strings(out)
	return out
}

// WorkspaceUserBase is Python's user base in a session with a named
// workspace.
const WorkspaceUserBase = manifest.Workspace + "/.local"

// ListWorkspaces lists client's workspaces.
func (r *BoxRunner) ListWorkspaces(ctx context.Context, client string) ([]contract.WorkspaceInfo, *contract.ErrorInfo) {
	return r.workspacesOf().list(ctx, client)
}

// DeleteWorkspace deletes client's workspace name, refused while in use.
func (r *BoxRunner) DeleteWorkspace(ctx context.Context, client, name string) *contract.ErrorInfo {
	return r.workspacesOf().remove(ctx, client, name)
}

// WorkspaceRunner is a Runner that keeps named workspaces.
type WorkspaceRunner interface {
	ListWorkspaces(ctx context.Context, client string) ([]contract.WorkspaceInfo, *contract.ErrorInfo)
	DeleteWorkspace(ctx context.Context, client, name string) *contract.ErrorInfo
}

var _ WorkspaceRunner = (*BoxRunner)(nil)
