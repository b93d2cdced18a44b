package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Podman's Docker-compatible API (`podman system service`) takes the same
// requests as Docker's, but reads some of the profile's items differently
// or not at all. Measured against Podman 4.3.1 (Debian bookworm, cgroup v1);
// docs/podman.md has the whole comparison.

// isPodman says whether the engine is Podman: it names itself in /version.
func isPodman(components []system.ComponentVersion) bool {
	for _, c := range components {
		if c.Name == "Podman Engine" {
			return true
		}
	}
	return false
}

// checkPodman finds out whether the engine is Podman and, when it is,
// whether it can run this server's boxes. prepare calls it.
func (d *Docker) checkPodman(ctx context.Context, defaultRuntime string) error {
	ver, err := d.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return engineError(err)
	}
	d.podman.Store(isPodman(ver.Components))
	if !d.podman.Load() {
		return nil
	}
	// Podman runs every box with its default runtime, whatever
	// HostConfig.Runtime names: under another one the isolation level
	// would silently not be the one asked for.
	if want := RuntimeFor(d.m.Isolation); defaultRuntime != want {
		return &sandbox.EngineError{Msg: fmt.Sprintf("the engine is Podman, whose default runtime is %s, and isolation %s needs %s", defaultRuntime, d.m.Isolation, want),
			Hint: fmt.Sprintf("Podman ignores the runtime a request names: set runtime = %q under [engine] in containers.conf (`scripts/podman.sh` does it for runc) and restart the service.", want)}
	}
	_, err = seccompFile(seccompOpts[d.m.Isolation])
	return err
}

// podmanSpec says a box's host config in the form Podman accepts:
//   - seccomp: Podman opens the value of seccomp= as a file and refuses the
//     inline JSON Docker takes ("file name too long"): the same profile
//     goes by path (seccompFile);
//   - masked paths: Podman ignores HostConfig.MaskedPaths (its own list
//     leaves /proc/interrupts readable); mask= says the same list;
//   - tmpfs: Podman refuses uid=, gid= and nr_inodes= ("unknown mount
//     option") and leaves out the noexec Docker adds. U gives the mount to
//     the box's user, as uid= and gid= did; noexec is said; notmpcopyup
//     keeps the image's directory out, as on Docker. The inode cap has no
//     Podman form: a flood of empty files ends at the memory limit instead;
//   - read-only root: Podman mounts a writable tmpfs, with no size cap, on
//     /run and /var/tmp of a read-only root (--read-only-tmpfs, on by
//     default and out of reach of its compat API) wherever nothing else is
//     mounted: an empty read-only tmpfs there is what the image has (empty
//     directories of a read-only root), and keeps /workspace and /tmp the
//     only writable places;
//   - nproc: without an nproc ulimit, rootful Podman 4.3 asks the runtime
//     for RLIMIT_NPROC 1048576, which fails every start ("setrlimit
//     RLIMIT_NPROC: Operation not permitted") where the engine lacks
//     CAP_SYS_RESOURCE. podmanNproc is a limit it may always set; the
//     profile's process limit remains the pids cgroup;
//   - folders: Podman's volumes of the local driver do not keep ro (the box
//     saw such a folder writable), but its Binds entries take nosuid, nodev
//     and noexec, which Docker's refuse: each folder bind becomes one, with
//     ro, private and non-recursive as on Docker.
//
// Everything else is unchanged.
func podmanSpec(host *container.HostConfig) error {
	for i, o := range host.SecurityOpt {
		if strings.HasPrefix(o, "seccomp=") {
			path, err := seccompFile(o)
			if err != nil {
				return err
			}
			host.SecurityOpt[i] = "seccomp=" + path
		}
	}
	if len(host.MaskedPaths) > 0 {
		host.SecurityOpt = append(host.SecurityOpt, "mask="+strings.Join(host.MaskedPaths, ":"))
	}
	for path, opts := range host.Tmpfs {
		var kept []string
		for _, o := range strings.Split(opts, ",") {
			switch k, _, _ := strings.Cut(o, "="); k {
			case "uid", "gid", "nr_inodes":
				continue
			}
			kept = append(kept, o)
		}
		host.Tmpfs[path] = strings.Join(append(kept, "noexec", "U", "notmpcopyup"), ",")
	}
	if host.ReadonlyRootfs {
		for _, p := range podmanReadOnlyTmpfs {
			if _, ok := host.Tmpfs[p]; !ok {
				host.Tmpfs[p] = "ro,nosuid,nodev,noexec,size=4k,notmpcopyup"
			}
		}
	}
	if err := podmanFolders(host); err != nil {
		return err
	}
	n := podmanNproc()
	host.Ulimits = append(host.Ulimits, &container.Ulimit{Name: "nproc", Soft: n, Hard: n})
	return nil
}

// podmanReadOnlyTmpfs are the places Podman mounts a writable tmpfs on
// when the root is read-only, besides /tmp.
var podmanReadOnlyTmpfs = []string{"/run", "/var/tmp"}

// seccompFile stores the profile of opt ("seccomp=<json>") where a Podman
// on this host reads it, and returns its path: named by the profile's hash,
// in a directory that only the server's user can change (a profile others
// could swap would be no profile), written again when missing. Podman reads
// it at each create, so this runs before each.
func seccompFile(opt string) (string, error) {
	profile := []byte(strings.TrimPrefix(opt, "seccomp="))
	sum := sha256.Sum256(profile)
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "runbox", "seccomp")
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".json")
	fail := func(err error) (string, error) {
		return "", &sandbox.EngineError{Msg: "storing the seccomp profile for Podman: " + err.Error(),
			Hint: "Podman reads the profile from a file: run runbox on Podman's host, as a user whose cache directory is its own."}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir} {
		fi, err := os.Lstat(p)
		if err != nil {
			return fail(err)
		}
		if uid, ok := fileOwner(fi); !ok || !fi.IsDir() || uid != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
			return fail(fmt.Errorf("%s must be a directory of uid %d that no one else may write", p, os.Getuid()))
		}
	}
	if b, err := os.ReadFile(path); err == nil && string(b) == string(profile) {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, ".profile-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(profile)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fail(err)
	}
	return path, nil
}

// podmanFolders turns the folder binds into Binds entries.
func podmanFolders(host *container.HostConfig) error {
	kept := host.Mounts[:0]
	for _, mt := range host.Mounts {
		if mt.Type != mount.TypeBind {
			kept = append(kept, mt)
			continue
		}
		if strings.Contains(mt.Source, ":") {
			return &sandbox.EngineError{Msg: "the folder " + mt.Source + " has a ':' in its path, which Podman's API cannot mount",
				Hint: "Rename the folder, or mount a parent of it."}
		}
		host.Binds = append(host.Binds, mt.Source+":"+mt.Target+":ro,nosuid,nodev,noexec,bind,rprivate")
	}
	host.Mounts = kept
	return nil
}
