package oci

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/linuxbox"
)

// Options configure the oci driver.
type Options struct {
	Manifest *manifest.Manifest
	// InitDir holds runbox-init (sandbox.ReadInitBinary); default: the
	// directory of the running binary.
	InitDir string
	// Dir holds the runtime's state and the boxes' bundles (a tmpfs:
	// they end with the host); default /run/runbox/oci.
	Dir string
	// Images holds the unpacked root file systems, one per image ID;
	// default /var/lib/runbox/oci.
	Images string
	Logger *slog.Logger
}

// OCI runs boxes with runc directly: the sandbox.Driver of the oci
// backend.
type OCI struct {
	m       *manifest.Manifest
	log     *slog.Logger
	owner   sandbox.Owner
	cli     *client.Client
	initSrc string
	dir     string
	images  string
	runc    string

	mu       sync.Mutex
	readyErr error
	initDir  string
	// rootfs maps an image to its unpacked root file system; digests to
	// its ID.
	rootfs  map[string]string
	digests map[string]string
	keep    func(string) bool
	// live are the boxes this server started and has not removed.
	live map[string]*box
	// unremoved are boxes whose removal failed; the reaper retries them.
	unremoved map[string]bool

	kernelLog *linuxbox.KernelLog
	stopLog   context.CancelFunc
}

var (
	_ sandbox.Driver = (*OCI)(nil)
	_ sandbox.Keeper = (*OCI)(nil)
)

// New prepares the driver; Ready checks the host.
func New(opts Options, owner sandbox.Owner) (*OCI, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	initSrc, err := sandbox.InitDirOr(opts.InitDir)
	if err != nil {
		return nil, err
	}
	o := &OCI{
		m: opts.Manifest, log: opts.Logger, owner: owner, cli: cli, initSrc: initSrc,
		dir: cmp(opts.Dir, "/run/runbox/oci"), images: cmp(opts.Images, "/var/lib/runbox/oci"),
		readyErr: errors.New("not checked yet"),
		rootfs:   map[string]string{}, digests: map[string]string{},
		live: map[string]*box{}, unremoved: map[string]bool{},
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.stopLog = cancel
	o.kernelLog = linuxbox.FollowKernelLog(ctx)
	return o, nil
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Isolation is runc, or gvisor when the boxes run under runsc.
func (o *OCI) Isolation() string { return o.m.Isolation }

// Close stops following the kernel log and closes the engine's client.
func (o *OCI) Close() error {
	o.stopLog()
	return o.cli.Close()
}

// SetKeep makes every reap leave the boxes keep holds.
func (o *OCI) SetKeep(keep func(string) bool) {
	o.mu.Lock()
	o.keep = keep
	o.mu.Unlock()
}

// Ready checks the host (Linux, root, runc), writes runbox-init where
// boxes bind it from, and unpacks every language's image; once ready it
// is cheap. A failure is checked again on the next call.
func (o *OCI) Ready(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.readyErr == nil {
		return nil
	}
	o.readyErr = o.prepare(ctx)
	if o.readyErr == nil {
		keep := o.keep
		go func() { _, _ = o.Reap(context.WithoutCancel(ctx), keep) }()
	}
	return o.readyErr
}

func (o *OCI) prepare(ctx context.Context) error {
	if o.m.Isolation != manifest.IsolationRunc && !o.gvisor() {
		return &sandbox.EngineError{Msg: "the oci backend runs isolation runc or gvisor", Hint: "Set isolation: runc or gvisor."}
	}
	if os.Geteuid() != 0 {
		return &sandbox.EngineError{Msg: "the oci backend runs boxes with runc, which needs root", Hint: "Run the server as root, or use backend: docker."}
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return &sandbox.EngineError{Msg: "runc is not on PATH", Hint: "Install runc (Debian: apt-get install runc; `make setup` installs the engine, which brings it)."}
	}
	if o.gvisor() {
		if runc, err = exec.LookPath("runsc"); err != nil {
			return &sandbox.EngineError{Msg: "runsc (gVisor) is not on PATH", Hint: "Install gVisor (`make setup` installs runsc), or set isolation: runc."}
		}
	}
	o.runc = runc
	// Root's alone: the unpacked images hold the image's set-uid files,
	// which no user of the host may reach. runc needs no path to be open
	// to the box's user: it mounts them as root.
	for _, d := range []string{o.dir, filepath.Join(o.dir, "boxes"), o.stateDir(), o.images, filepath.Join(o.images, "rootfs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return &sandbox.EngineError{Msg: err.Error(), Hint: "Check that the server may write there."}
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return &sandbox.EngineError{Msg: err.Error(), Hint: "Check that the server owns " + d + "."}
		}
	}
	bin, err := sandbox.ReadInitBinary(o.initSrc, runtime.GOARCH)
	if err != nil {
		return &sandbox.EngineError{Msg: err.Error(), Hint: "Build runbox-init beside the runbox binary (`make build`)."}
	}
	if o.initDir, err = o.writeInit(bin); err != nil {
		return &sandbox.EngineError{Msg: "writing runbox-init: " + err.Error(), Hint: "Check that the server may write " + o.dir + "."}
	}
	for _, l := range o.m.Languages {
		if _, err := o.unpacked(ctx, l.Image); err != nil {
			return err
		}
	}
	o.prune(ctx)
	return nil
}

// Unpacked images and runbox-init copies of other builds are pruned past
// the keepOld newest, once untouched for oldAge (a server touches its own
// as it starts) and used by no box runc knows.
const (
	keepOld = 2
	oldAge  = 24 * time.Hour
)

// prune removes the unpacked images and runbox-init copies of other
// images and builds (~600 MB an image). Called under o.mu.
func (o *OCI) prune(ctx context.Context) {
	inUse := map[string]bool{o.initDir: true}
	for _, dir := range o.rootfs {
		inUse[dir] = true
	}
	now := time.Now()
	for dir := range inUse {
		_ = os.Chtimes(dir, now, now)
	}
	states, err := o.list(ctx)
	if err != nil {
		return
	}
	for _, st := range states {
		inUse[st.Rootfs] = true
		// The runbox-init copy a box binds.
		var spec struct {
			Mounts []struct{ Source string } `json:"mounts"`
		}
		if raw, err := os.ReadFile(filepath.Join(o.dir, "boxes", st.ID, "config.json")); err == nil && json.Unmarshal(raw, &spec) == nil {
			for _, mt := range spec.Mounts {
				inUse[mt.Source] = true
			}
		}
	}
	for _, pattern := range []string{filepath.Join(o.images, "rootfs", "*"), filepath.Join(o.dir, "init-*")} {
		dirs, _ := filepath.Glob(pattern)
		type aged struct {
			dir string
			mod time.Time
		}
		var old []aged
		for _, d := range dirs {
			if info, err := os.Stat(d); err == nil && !inUse[d] {
				old = append(old, aged{d, info.ModTime()})
			}
		}
		slices.SortFunc(old, func(a, b aged) int { return b.mod.Compare(a.mod) })
		for _, a := range old[min(len(old), keepOld):] {
			if now.Sub(a.mod) > oldAge && os.RemoveAll(a.dir) == nil {
				o.log.Info("removed an unused copy for the oci backend", "dir", a.dir)
			}
		}
	}
}

// writeInit puts runbox-init in a directory of its own, named by its hash,
// that boxes bind read-only.
func (o *OCI) writeInit(bin []byte) (string, error) {
	sum := sha256.Sum256(bin)
	dir := filepath.Join(o.dir, "init-"+hex.EncodeToString(sum[:8]))
	if b, err := os.ReadFile(filepath.Join(dir, "runbox-init")); err == nil && sha256.Sum256(b) == sum {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(o.dir, ".init-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "runbox-init"), bin, 0o555); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	return dir, os.Rename(tmp, dir)
}

// ImageDigest is the image's ID on the local engine.
func (o *OCI) ImageDigest(ctx context.Context, image string) (string, error) {
	o.mu.Lock()
	id, ok := o.digests[image]
	o.mu.Unlock()
	if ok {
		return id, nil
	}
	actx, cancel := context.WithTimeout(ctx, sandbox.APITimeout)
	defer cancel()
	ins, err := o.cli.ImageInspect(actx, image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", imageMissing(image)
		}
		return "", engineError(err)
	}
	o.mu.Lock()
	o.digests[image] = ins.ID
	o.mu.Unlock()
	return ins.ID, nil
}

// unpacked returns the root file system of image, unpacking the engine's
// image (docker export of a created, never-started container) the first
// time an image ID is seen. Called under o.mu.
func (o *OCI) unpacked(ctx context.Context, image string) (string, error) {
	if dir, ok := o.rootfs[image]; ok {
		return dir, nil
	}
	actx, cancel := context.WithTimeout(ctx, sandbox.APITimeout)
	ins, err := o.cli.ImageInspect(actx, image)
	cancel()
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", imageMissing(image)
		}
		return "", engineError(err)
	}
	o.digests[image] = ins.ID
	dir := filepath.Join(o.images, "rootfs", strings.TrimPrefix(ins.ID, "sha256:")[:24])
	if _, err := os.Stat(filepath.Join(dir, sandbox.InitDir)); err != nil {
		start := time.Now()
		if err := o.unpack(ctx, image, dir); err != nil {
			return "", err
		}
		o.log.Info("unpacked the sandbox image for the oci backend", "image", image, "dir", dir, "took", time.Since(start).Round(time.Millisecond))
	}
	o.rootfs[image] = dir
	return dir, nil
}

// unpackTimeout bounds an image's export and unpacking (~600 MB).
const unpackTimeout = 5 * time.Minute

func (o *OCI) unpack(ctx context.Context, image, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, unpackTimeout)
	defer cancel()
	created, err := o.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: []string{"/bin/true"}, NetworkDisabled: true, Labels: o.owner.Labels(nil)},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return imageMissing(image)
		}
		return engineError(err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), sandbox.APITimeout)
		defer rcancel()
		_, _ = o.cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true})
	}()
	rc, err := o.cli.ContainerExport(ctx, created.ID, client.ContainerExportOptions{})
	if err != nil {
		return engineError(err)
	}
	defer rc.Close()
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".unpack-")
	if err != nil {
		return &sandbox.EngineError{Msg: err.Error(), Hint: "Check that the server may write " + o.images + "."}
	}
	defer os.RemoveAll(tmp)
	// GNU tar: numeric owners and modes as in the image; it never writes
	// through a link the archive made, nor outside tmp.
	tar := exec.CommandContext(ctx, "tar", "-x", "-p", "--numeric-owner", "-C", tmp)
	tar.Stdin = rc
	if out, err := tar.CombinedOutput(); err != nil {
		return &sandbox.EngineError{Msg: fmt.Sprintf("unpacking %s: %v: %s", image, err, strings.TrimSpace(string(out))), Hint: "Check the free space under " + o.images + "."}
	}
	// Mount points the boxes need; the root is read-only in a box.
	for _, p := range []string{manifest.Workspace, manifest.Tmp, sandbox.InitDir, "/mnt/roots", "/proc", "/sys", "/dev"} {
		if err := os.MkdirAll(filepath.Join(tmp, p), 0o755); err != nil {
			return &sandbox.EngineError{Msg: err.Error(), Hint: "Check the free space under " + o.images + "."}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "etc", "hostname"), []byte("sandbox\n"), 0o644); err != nil {
		return &sandbox.EngineError{Msg: err.Error(), Hint: "Check the free space under " + o.images + "."}
	}
	_ = os.Chmod(tmp, 0o755)
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return &sandbox.EngineError{Msg: err.Error(), Hint: "Check that the server may write " + o.images + "."}
	}
	return nil
}

// Start writes the box's bundle and runs it: `runc run` in the
// foreground, whose stdin and stdout become runbox-init's (the channel)
// and whose stderr carries runc's and runbox-init's diagnostics.
func (o *OCI) Start(ctx context.Context, spec sandbox.BoxSpec) (sandbox.Box, error) {
	b, s, err := o.newBox(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := b.run(s); err != nil {
		b.Remove()
		return nil, &sandbox.EngineError{Msg: "starting a box with runc: " + err.Error(), Hint: "Run `runbox doctor`; check runc and " + o.dir + "."}
	}
	o.mu.Lock()
	o.live[b.id] = b
	o.mu.Unlock()
	return b, nil
}

// newBox is a box not yet run, and its spec.
func (o *OCI) newBox(ctx context.Context, spec sandbox.BoxSpec) (*box, *specs.Spec, error) {
	if err := o.Ready(ctx); err != nil {
		return nil, nil, err
	}
	o.mu.Lock()
	rootfs, err := o.unpacked(ctx, spec.Language.Image)
	initDir := o.initDir
	o.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	m := o.m
	if spec.Limits != nil {
		mm := *o.m
		mm.Limits = *spec.Limits
		m = &mm
	}
	id := newID()
	// Every box listens on its relay: a restarted server, or a session's
	// channel after one broke, reaches it there (Attach).
	p := specParams{rootfs: rootfs, initDir: initDir, cgroup: cgroupParent + "/" + id,
		initArgs: append([]string{initproto.RelayFlag}, spec.InitArgs...), labels: spec.Labels, mounts: spec.Mounts, workspace: spec.Workspace}
	if spec.Pooled {
		p.shares = pooledCPUShares
	}
	s, err := boxSpec(m, p)
	if err != nil {
		return nil, nil, &sandbox.EngineError{Msg: err.Error(), Hint: "Check the manifest (`runbox doctor`)."}
	}
	b := &box{o: o, id: id, bundle: filepath.Join(o.dir, "boxes", id), exited: make(chan struct{}),
		diag: &sandbox.Capped{Max: 16 << 10}, lowWeight: spec.Pooled}
	return b, s, nil
}

// cgroupParent holds every box's cgroup (cgroupfs: /sys/fs/cgroup/<controller>/runbox/<id>).
const cgroupParent = "/runbox"

// idPrefix begins the name of every box of this backend.
const idPrefix = "runbox-"

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return idPrefix + hex.EncodeToString(b)
}

// isBoxID says whether id has the form newID gives.
func isBoxID(id string) bool {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// Reap removes the boxes whose server is gone (judged as the Docker
// driver judges them, from the labels in each box's annotations), the
// bundles runc no longer knows, and this server's boxes whose removal
// failed. A box keep holds stays.
func (o *OCI) Reap(ctx context.Context, keep func(string) bool) (int, error) {
	if o.runc == "" {
		return 0, nil
	}
	states, err := o.list(ctx)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	live := maps.Clone(o.live)
	unremoved := maps.Clone(o.unremoved)
	o.mu.Unlock()
	maxAge := o.m.Limits.MaxTimeout() + o.m.Pool.Idle() + sandbox.BackstopGrace + 2*sandbox.APITimeout + initproto.DefaultKeep
	removed := 0
	known := map[string]bool{}
	for _, st := range states {
		known[st.ID] = true
		if !strings.HasPrefix(st.ID, idPrefix) || (keep != nil && keep(st.ID)) {
			continue
		}
		if _, mine := live[st.ID]; mine && !unremoved[st.ID] {
			continue
		}
		if !unremoved[st.ID] {
			if isSession, expired := sandbox.SessionBoxExpired(st.Annotations, time.Now()); isSession {
				if !expired && st.Status == "running" {
					continue
				}
			} else if alive, known := sandbox.OwnerAlive(st.Annotations, o.owner); alive ||
				((!known || sandbox.KeptElsewhere(o.keptState(st.ID), o.owner)) && time.Since(st.Created) <= maxAge) {
				// A box of another host, or one holding a run another state
				// directory's store keeps, is judged by its age.
				continue
			}
		}
		if err := o.delete(st.ID); err != nil {
			o.log.Warn("reaping a leftover box failed", "box", st.ID, "err", err)
			continue
		}
		removed++
		o.mu.Lock()
		delete(o.unremoved, st.ID)
		o.mu.Unlock()
		o.log.Info("reaped a leftover box", "box", st.ID, "owner_pid", st.Annotations[sandbox.LabelOwnerPID], "run_id", st.Annotations[sandbox.LabelRunID])
	}
	// Bundles of boxes runc never created, or already deleted.
	entries, _ := os.ReadDir(filepath.Join(o.dir, "boxes"))
	for _, e := range entries {
		if _, mine := live[e.Name()]; mine || known[e.Name()] || !strings.HasPrefix(e.Name(), idPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 2*sandbox.APITimeout {
			_ = os.RemoveAll(filepath.Join(o.dir, "boxes", e.Name()))
		}
	}
	return removed, nil
}

// state is a box as `runc list` shows it.
type state struct {
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Status      string            `json:"status"`
	Created     time.Time         `json:"created"`
	Rootfs      string            `json:"rootfs"`
	Annotations map[string]string `json:"annotations"`
}

func (o *OCI) list(ctx context.Context) ([]state, error) {
	ctx, cancel := context.WithTimeout(ctx, sandbox.APITimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, o.runc, o.rt("list", "--format", "json")...).Output()
	if err != nil {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	var states []state
	if err := json.Unmarshal(out, &states); err != nil && len(strings.TrimSpace(string(out))) > 0 && strings.TrimSpace(string(out)) != "null" {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	if o.gvisor() {
		o.fromBundles(states)
	}
	return states, nil
}

// delete removes a box from runc (killing it if it runs), its cgroup
// with it, and its bundle.
func (o *OCI) delete(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), sandbox.APITimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, o.runc, o.rt("delete", "--force", id)...).CombinedOutput()
	if err != nil && o.gvisor() && !o.knows(ctx, id) {
		// runsc may report a failed stop of a sandbox it did remove.
		err = nil
	}
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runc delete: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return os.RemoveAll(filepath.Join(o.dir, "boxes", id))
}

// stateDir is the runtime's state: runc's, or runsc's for gVisor.
func (o *OCI) stateDir() string {
	if o.gvisor() {
		return filepath.Join(o.dir, "runsc")
	}
	return filepath.Join(o.dir, "runc")
}

// gvisor says whether boxes run under runsc.
func (o *OCI) gvisor() bool { return o.m.Isolation == manifest.IsolationGVisor }

// rt are the runtime's arguments for a command: its state directory and,
// for runsc, a sandbox with loopback only and the spec's seccomp filter
// applied inside it, as the Docker engine runs runsc.
func (o *OCI) rt(args ...string) []string {
	global := []string{"--root", o.stateDir()}
	if o.gvisor() {
		global = append(global, "--network=none", "--oci-seccomp")
	}
	return append(global, args...)
}

func imageMissing(image string) error {
	return &sandbox.EngineError{Msg: fmt.Sprintf("the sandbox image %s is missing on the local engine, where the oci backend takes it from", image),
		Hint: "Make it available with `runbox setup` and retry."}
}

func engineError(err error) error {
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) {
		return &sandbox.EngineError{Msg: "the Docker engine, which holds the sandbox image, is not reachable: " + err.Error(),
			Hint: "Start the Docker engine (`make setup` installs and starts it) and retry."}
	}
	return &sandbox.EngineError{Msg: "the Docker engine refused a request: " + err.Error(),
		Hint: "Retry once; if it persists, the operator should run `runbox doctor`."}
}

// fromBundles fills in what `runsc list` does not show (annotations,
// creation, root file system) from each box's bundle, which runbox wrote.
func (o *OCI) fromBundles(states []state) {
	for i := range states {
		st := &states[i]
		if !isBoxID(st.ID) {
			continue
		}
		dir := filepath.Join(o.dir, "boxes", st.ID)
		var spec struct {
			Annotations map[string]string     `json:"annotations"`
			Root        struct{ Path string } `json:"root"`
		}
		if raw, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil && json.Unmarshal(raw, &spec) == nil {
			st.Annotations, st.Rootfs = spec.Annotations, spec.Root.Path
		}
		if info, err := os.Stat(dir); err == nil && st.Created.IsZero() {
			st.Created = info.ModTime()
		}
	}
}

// knows says whether the runtime still has box id.
func (o *OCI) knows(ctx context.Context, id string) bool {
	return exec.CommandContext(ctx, o.runc, o.rt("state", id)...).Run() == nil
}
