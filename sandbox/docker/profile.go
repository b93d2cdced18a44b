package docker

import (
	"runtime"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/linuxbox"
)

// seccompOpts are the SecurityOpt entries that carry the seccomp profile
// at each isolation level: inline, so the engine's own default never
// applies.
var seccompOpts = map[string]string{
	manifest.IsolationRunc:   "seccomp=" + linuxbox.Seccomp(manifest.IsolationRunc),
	manifest.IsolationGVisor: "seccomp=" + linuxbox.Seccomp(manifest.IsolationGVisor),
}

// RuntimeFor maps an isolation level to the engine's OCI runtime name.
func RuntimeFor(isolation string) string {
	if isolation == manifest.IsolationGVisor {
		return "runsc"
	}
	return "runc"
}

// boxSpec is the isolation profile of one box: every item of the contract,
// on every run, with no switch to weaken it.
func boxSpec(m *manifest.Manifest, lang manifest.Language, labels map[string]string, initVolume string, initArgs []string) (*container.Config, *container.HostConfig) {
	lim := m.Limits
	falseV := false
	pids := lim.Pids
	cfg := &container.Config{
		Image:      lang.Image,
		User:       m.User,
		Hostname:   "sandbox",
		WorkingDir: manifest.Workspace,
		Entrypoint: []string{sandbox.InitPath},
		Cmd:        append([]string{}, initArgs...),
		// The image's environment is not the program's: runbox-init
		// gives the program exactly the job's.
		Env:             []string{},
		Labels:          labels,
		NetworkDisabled: true,
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		OpenStdin:       true,
		// Stdin outlives an attach: a restarted server attaches again to
		// collect a run, or a session's next call (the channel's reset
		// framing, internal/initproto).
		StdinOnce: false,
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", seccompOpts[m.Isolation]},
		MaskedPaths:    linuxbox.MaskedPaths(runtime.NumCPU()),
		ReadonlyPaths:  linuxbox.ReadonlyPaths(),
		ReadonlyRootfs: true,
		// No /dev/shm: /workspace and /tmp are the only writable places.
		IpcMode: container.IPCModeNone,
		Tmpfs: map[string]string{
			manifest.Workspace: linuxbox.TmpfsOptions(int64(lim.WorkspaceBytes), lim.WorkspaceFiles, m.User, "0755"),
			manifest.Tmp:       linuxbox.TmpfsOptions(int64(lim.TmpBytes), lim.WorkspaceFiles, m.User, "1777"),
		},
		// Our own PID 1 (runbox-init), never the engine's docker-init,
		// which is a host file shared by every box.
		Init: &falseV,
		// Output goes over the attach stream only; nothing is logged.
		LogConfig: container.LogConfig{Type: "none"},
		Runtime:   RuntimeFor(m.Isolation),
		Mounts: append([]mount.Mount{{
			Type:          mount.TypeVolume,
			Source:        initVolume,
			Target:        sandbox.InitDir,
			ReadOnly:      true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		}}, folderMounts(m)...),
		Resources: container.Resources{
			Memory:     int64(lim.Memory),
			MemorySwap: int64(lim.Memory), // no swap
			NanoCPUs:   int64(lim.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: lim.OpenFiles, Hard: lim.OpenFiles},
				{Name: "fsize", Soft: int64(lim.WorkspaceBytes), Hard: int64(lim.WorkspaceBytes)},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	if m.Isolation == manifest.IsolationGVisor {
		// runsc on this engine refuses a pids limit (the sandbox dies on
		// fork): runbox-init enforces RLIMIT_NPROC instead.
		host.PidsLimit = nil
	}
	return cfg, host
}

// uid is the numeric user the boxes run as (the manifest's "uid:gid").
func (d *Docker) uid() int {
	u, _, _ := strings.Cut(d.m.User, ":")
	n, err := strconv.Atoi(u)
	if err != nil {
		return -1
	}
	return n
}

// folderMounts are the manifest's declared folders: read-only binds at
// /mnt/<name>, without the host's submounts under them. A link inside
// resolves in the box's own file system, never the host's.
func folderMounts(m *manifest.Manifest) []mount.Mount {
	out := make([]mount.Mount, 0, len(m.Mounts))
	for _, mt := range m.Mounts {
		out = append(out, readOnlyBind(mt.Path, mt.Target()))
	}
	return out
}

// extraMounts are a box's own folders (a client's roots), mounted as the
// declared folders are.
func extraMounts(extra []sandbox.HostMount) []mount.Mount {
	out := make([]mount.Mount, 0, len(extra))
	for _, hm := range extra {
		out = append(out, readOnlyBind(hm.Source, hm.Target))
	}
	return out
}

func readOnlyBind(source, target string) mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: source, Target: target, ReadOnly: true,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate, NonRecursive: true}}
}
