package oci

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	seccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/linuxbox"
)

// boxSpec is a box's OCI spec: what the Docker engine (20.10) makes of the
// Docker driver's box config, written directly (checked against an
// engine's config.json of a runbox box), with runbox-init bind-mounted
// from the host instead of a volume.
func boxSpec(m *manifest.Manifest, p specParams) (*specs.Spec, error) {
	lim := m.Limits
	uid, gid, err := ids(m.User)
	if err != nil {
		return nil, err
	}
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User: specs.User{UID: uid, GID: gid, AdditionalGids: []uint32{gid}},
			Args: append([]string{sandbox.InitPath}, p.initArgs...),
			// The program's environment is the job's (runbox-init);
			// this is runbox-init's own, as the engine gives it.
			Env:             []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=sandbox"},
			Cwd:             manifest.Workspace,
			Capabilities:    &specs.LinuxCapabilities{},
			NoNewPrivileges: true,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Soft: uint64(lim.OpenFiles), Hard: uint64(lim.OpenFiles)},
				{Type: "RLIMIT_FSIZE", Soft: uint64(lim.WorkspaceBytes), Hard: uint64(lim.WorkspaceBytes)},
				{Type: "RLIMIT_CORE"},
			},
		},
		Root:     &specs.Root{Path: p.rootfs, Readonly: true},
		Hostname: "sandbox",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"ro", "nosuid", "noexec", "nodev"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: sandbox.InitDir, Type: "bind", Source: p.initDir, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			tmpfs(manifest.Tmp, linuxbox.TmpfsOptions(int64(lim.TmpBytes), lim.WorkspaceFiles, m.User, "1777")),
			tmpfs(manifest.Workspace, linuxbox.TmpfsOptions(int64(lim.WorkspaceBytes), lim.WorkspaceFiles, m.User, "0755")),
		},
		Annotations: p.labels,
		Linux: &specs.Linux{
			Resources: &specs.LinuxResources{
				Devices: allowedDevices(),
				Memory:  &specs.LinuxMemory{Limit: ptr(int64(lim.Memory)), Swap: ptr(int64(lim.Memory))},
				CPU:     &specs.LinuxCPU{Quota: ptr(int64(lim.CPUs * cpuPeriod)), Period: ptr(uint64(cpuPeriod))},
				Pids:    &specs.LinuxPids{Limit: int64(lim.Pids)},
			},
			CgroupsPath: p.cgroup,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
			},
			MaskedPaths:   linuxbox.MaskedPaths(runtime.NumCPU()),
			ReadonlyPaths: linuxbox.ReadonlyPaths(),
		},
	}
	if p.shares != 0 {
		s.Linux.Resources.CPU.Shares = ptr(p.shares)
	}
	if m.Isolation == manifest.IsolationGVisor {
		// runsc puts the whole sandbox in the cgroup: its kernel's threads
		// and a host stub for each of the box's processes count, not the
		// box's processes. A short pipeline filled it, and gVisor's kernel
		// panicked on the failed fork, ending the box without a report.
		// As on the Docker driver, RLIMIT_NPROC (the job's NProc) is the
		// box's process limit, counted by gVisor's own kernel.
		s.Linux.Resources.Pids = nil
	}
	for _, mt := range m.Mounts {
		s.Mounts = append(s.Mounts, readOnlyBind(mt.Path, mt.Target()))
	}
	for _, hm := range p.mounts {
		s.Mounts = append(s.Mounts, readOnlyBind(hm.Source, hm.Target))
	}
	withWorkspace(s, p.workspace)
	// After the capabilities: the profile's rules that need one are left
	// out, as the engine leaves them out for a box with none.
	if s.Linux.Seccomp, err = seccomp.LoadProfile(linuxbox.Seccomp(m.Isolation), s); err != nil {
		return nil, fmt.Errorf("the seccomp profile: %w", err)
	}
	return s, nil
}

// specParams is what differs from one box to the next.
type specParams struct {
	rootfs, initDir, cgroup string
	initArgs                []string
	labels                  map[string]string
	mounts                  []sandbox.HostMount
	// workspace is a named workspace's host mount, the box's /workspace.
	workspace string
	// shares is the box's CPU weight; 0: the kernel's default.
	shares uint64
}

// cpuPeriod is the CFS period the CPU quota is a share of, in µs.
const cpuPeriod = 100000

func tmpfs(dest, opts string) specs.Mount {
	// The engine adds noexec and rprivate to a --tmpfs mount.
	return specs.Mount{Destination: dest, Type: "tmpfs", Source: "tmpfs", Options: append([]string{"noexec", "rprivate"}, strings.Split(opts, ",")...)}
}

// readOnlyBind is a declared folder or a client's root as the Docker
// driver's folder volumes give it (sandbox/docker folders.go): read-only,
// nosuid, nodev, noexec, private, and without the host's submounts under
// it. runc remounts the bind with all of these flags.
func readOnlyBind(source, target string) specs.Mount {
	return specs.Mount{Destination: target, Type: "bind", Source: source, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec", "rprivate"}}
}

// allowedDevices is the engine's device cgroup: nothing but the standard
// character devices, and never /dev/net/tun.
func allowedDevices() []specs.LinuxDeviceCgroup {
	c := func(major, minor int64) specs.LinuxDeviceCgroup {
		return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"}
	}
	tunMajor, tunMinor := int64(10), int64(229)
	return []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		c(1, 5), c(1, 3), c(1, 9), c(1, 8), c(5, 0), c(5, 1),
		{Allow: false, Type: "c", Major: &tunMajor, Minor: &tunMinor, Access: "rwm"},
	}
}

// ids reads the manifest's numeric "uid:gid".
func ids(user string) (uid, gid uint32, err error) {
	u, g, _ := strings.Cut(user, ":")
	un, err1 := strconv.ParseUint(u, 10, 32)
	gn, err2 := strconv.ParseUint(g, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("the oci backend needs a numeric user uid:gid, not %q", user)
	}
	return uint32(un), uint32(gn), nil
}

func ptr[T any](v T) *T { return &v }
