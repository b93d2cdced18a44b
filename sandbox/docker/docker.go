package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/linuxbox"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/manifest"
)

const apiTimeout, killTimeout = sandbox.APITimeout, sandbox.KillTimeout

// Options configure the Docker driver.
type Options struct {
	Manifest *manifest.Manifest
	// sandbox.InitDir holds runbox-init-linux-<arch> (or runbox-init for the
	// host's own arch); default: the directory of the running binary.
	InitDir string
	Logger  *slog.Logger
}

// Docker starts boxes as hardened containers on a Docker-API engine
// (Docker, or Podman's compatible API): the sandbox.Driver for engines.
type Docker struct {
	cli   *client.Client
	m     *manifest.Manifest
	log   *slog.Logger
	owner sandbox.Owner

	initDir string

	mu       sync.Mutex
	readyErr error // nil once ready
	// keep holds boxes from the reaper (SetKeep).
	keep func(string) bool
	// readyTries counts the checks Ready made, for callers that waited
	// on one.
	readyTries atomic.Int64
	initVolume string
	digests    map[string]string
	// podman: the engine is Podman (podman.go); read without the lock.
	podman atomic.Bool
	// unremoved are this server's boxes whose removal failed (the engine
	// was away); the reaper retries them.
	unremoved map[string]bool
	// folderVolumes are the folder volumes this server made (folders.go).
	folderVolumes map[string]bool

	// kernelLog names the system call of a forbidden_syscall; nil when
	// the kernel log cannot be read.
	kernelLog *linuxbox.KernelLog
	stopLog   context.CancelFunc
}

var _ sandbox.Driver = (*Docker)(nil)

// New connects to the engine named by the environment (DOCKER_HOST,
// else the local socket); the client negotiates the API version. An engine
// that is down is not an error here: calls report it until it is back.
func New(opts Options, owner sandbox.Owner) (*Docker, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	initDir, err := sandbox.InitDirOr(opts.InitDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Docker{
		cli: cli, m: opts.Manifest, log: log, owner: owner,
		initDir:       initDir,
		readyErr:      errors.New("not checked yet"),
		digests:       map[string]string{},
		unremoved:     map[string]bool{},
		folderVolumes: map[string]bool{},
		stopLog:       cancel,
	}
	d.kernelLog = linuxbox.FollowKernelLog(ctx)
	return d, nil
}

// Close stops following the kernel log and closes the engine's client.
func (d *Docker) Close() error {
	d.stopLog()
	d.removeFolderVolumes()
	return d.cli.Close()
}

// Isolation is the manifest's level: the engine runs it as asked (prepare
// refuses a Podman whose default runtime would not).
func (d *Docker) Isolation() string { return d.m.Isolation }

// Ready checks the engine and prepares what boxes need (the runbox-init
// volume), once; after a failure it checks again on the next call. A call
// that waited for a check under way takes that check's answer rather
// than trying again: a hung engine costs each caller one API deadline at
// most, even when the server's start-up check (beside serving) holds it.
func (d *Docker) Ready(ctx context.Context) error {
	seen := d.readyTries.Load()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.readyErr == nil || d.readyTries.Load() != seen {
		return d.readyErr
	}
	d.readyErr = d.prepare(ctx)
	d.readyTries.Add(1)
	return d.readyErr
}

func (d *Docker) invalidate(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readyErr = err
	clear(d.digests)
}

func (d *Docker) prepare(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	info, err := d.cli.Info(actx, client.InfoOptions{})
	if err != nil {
		return engineError(err)
	}
	if d.m.Isolation == manifest.IsolationGVisor {
		if _, ok := info.Info.Runtimes["runsc"]; !ok {
			return &sandbox.EngineError{Msg: "the engine has no runsc runtime for the gvisor isolation level",
				Hint: "Install runsc and register it in /etc/docker/daemon.json (`make setup` does both), or set isolation: runc."}
		}
	}
	if err := d.checkPodman(actx, info.Info.DefaultRuntime); err != nil {
		return err
	}
	bin, err := sandbox.ReadInitBinary(d.initDir, info.Info.Architecture)
	if err != nil {
		return &sandbox.EngineError{Msg: err.Error(), Hint: "Build runbox-init beside the runbox binary (`make build`)."}
	}
	vol, err := d.ensureInitVolume(ctx, bin)
	if err != nil {
		return err
	}
	d.initVolume = vol
	d.pruneInitVolumes(ctx, vol)
	// Boxes left while the engine was away.
	keep := d.keep // under d.mu, held by Ready
	go func() { _, _ = d.Reap(context.WithoutCancel(ctx), keep) }()
	d.log.Debug("engine ready", "server", info.Info.ServerVersion, "arch", info.Info.Architecture, "init_volume", vol)
	return nil
}

func engineError(err error) error {
	var ee *sandbox.EngineError
	switch {
	case errors.As(err, &ee):
		return ee
	case client.IsErrConnectionFailed(err), errors.Is(err, context.DeadlineExceeded):
		return &sandbox.EngineError{Msg: "the Docker engine is not reachable: " + err.Error(),
			Hint: "Start the Docker engine (`make setup` installs and starts it) and retry; runbox recovers by itself."}
	}
	return &sandbox.EngineError{Msg: "the Docker engine refused a request: " + err.Error(),
		Hint: "Retry once; if it persists, the operator should run `runbox doctor`."}
}

// ensureInitVolume makes a read-only-mountable volume that holds
// runbox-init. A volume (not a host path) works with remote engines too.
// It is filled by copying into a created, never-started container.
func (d *Docker) ensureInitVolume(ctx context.Context, bin []byte) (string, error) {
	sum := sha256.Sum256(bin)
	sha := hex.EncodeToString(sum[:])
	name := "runbox-init-" + sha[:16]
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if v, err := d.cli.VolumeInspect(actx, name, client.VolumeInspectOptions{}); err == nil {
		if v.Volume.Labels[sandbox.LabelInitSHA] == sha {
			return name, nil
		}
		// Created by the engine on a mount, not by us: empty.
		if _, err := d.cli.VolumeRemove(actx, name, client.VolumeRemoveOptions{Force: true}); err != nil {
			return "", engineError(err)
		}
	} else if !cerrdefs.IsNotFound(err) {
		return "", engineError(err)
	}
	if len(d.m.Languages) == 0 {
		return "", &sandbox.EngineError{Msg: "no language configured", Hint: "Add a language to the manifest."}
	}
	// The label is what tells a filled volume from one the engine made
	// empty on a mount. Two servers filling it at once write the same
	// bytes.
	if _, err := d.cli.VolumeCreate(actx, client.VolumeCreateOptions{Name: name,
		Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelInitSHA: sha}}); err != nil {
		return "", engineError(err)
	}
	image := d.m.Languages[0].Image
	helper, err := d.cli.ContainerCreate(actx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Entrypoint: []string{sandbox.InitPath}, NetworkDisabled: true,
			Labels: d.owner.Labels(nil)},
		HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: sandbox.InitDir}}},
	})
	if err != nil {
		_, _ = d.cli.VolumeRemove(actx, name, client.VolumeRemoveOptions{Force: true})
		if cerrdefs.IsNotFound(err) {
			return "", imageMissing(image)
		}
		return "", engineError(err)
	}
	// Not d.remove: prepare holds d.mu, which d.remove takes.
	defer func() { _ = d.removeContainer(helper.ID) }()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "runbox-init", Mode: 0o555, Size: int64(len(bin)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
	_, _ = tw.Write(bin)
	_ = tw.Close()
	if _, err := d.cli.CopyToContainer(actx, helper.ID, client.CopyToContainerOptions{DestinationPath: sandbox.InitDir, Content: &buf}); err != nil {
		_ = d.removeContainer(helper.ID)
		_, _ = d.cli.VolumeRemove(actx, name, client.VolumeRemoveOptions{Force: true})
		return "", engineError(err)
	}
	return name, nil
}

// keepInitVolumes is how many volumes of other runbox-init builds stay,
// and initVolumeAge how old a volume must be before it may go: servers of
// other versions sharing the engine keep theirs. A volume a server uses
// can still be removed between its boxes (the engine refuses only while
// one is mounted); that server makes it again at its next start (Start).
const (
	keepInitVolumes = 3
	initVolumeAge   = 24 * time.Hour
)

// pruneInitVolumes removes volumes of older runbox-init builds, past the
// newest few and a day old.
func (d *Docker) pruneInitVolumes(ctx context.Context, current string) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := d.cli.VolumeList(actx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", sandbox.LabelInitSHA)})
	if err != nil {
		return
	}
	for _, name := range stale(list.Items, current, time.Now()) {
		if _, err := d.cli.VolumeRemove(actx, name, client.VolumeRemoveOptions{}); err == nil {
			d.log.Debug("removed an old runbox-init volume", "volume", name)
		}
	}
}

// stale names the runbox-init volumes other than current that may go: all
// but the keepInitVolumes newest, and of those only the ones created more
// than initVolumeAge before now (or whose creation time is unreadable).
func stale(vols []volume.Volume, current string, now time.Time) []string {
	others := slices.DeleteFunc(slices.Clone(vols), func(v volume.Volume) bool { return v.Name == current })
	slices.SortFunc(others, func(a, b volume.Volume) int { return strings.Compare(b.CreatedAt, a.CreatedAt) })
	var names []string
	for _, v := range others[min(len(others), keepInitVolumes):] {
		if t, err := time.Parse(time.RFC3339, v.CreatedAt); err == nil && now.Sub(t) < initVolumeAge {
			continue
		}
		names = append(names, v.Name)
	}
	return names
}

func imageMissing(image string) error {
	if strings.HasPrefix(image, derived.Repository+":") {
		return noImageError{&sandbox.EngineError{Msg: fmt.Sprintf("the derived image of the manifest's packages, %s, is missing", image),
			Hint: "Build it with `runbox images build` (`make setup` runs it) and retry."}}
	}
	return noImageError{&sandbox.EngineError{Msg: fmt.Sprintf("the sandbox image %s is missing", image),
		Hint: "Make it available with `runbox setup` (pulls it, or builds it inside the engine; no registry needed) and retry."}}
}

// noImageError is the sandbox image's absence.
type noImageError struct{ *sandbox.EngineError }

func (e noImageError) Unwrap() error { return e.EngineError }
