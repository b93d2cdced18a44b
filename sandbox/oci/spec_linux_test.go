package oci

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

func testSpec(t *testing.T, edit func(m *manifest.Manifest), p specParams) *specs.Spec {
	t.Helper()
	m := manifest.Default()
	if edit != nil {
		edit(m)
	}
	s, err := boxSpec(m, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBoxSpecHardening: every item of the isolation profile is in the
// spec runc gets, on every box.
func TestBoxSpecHardening(t *testing.T) {
	s := testSpec(t, nil, specParams{rootfs: "/images/x", initDir: "/run/init", cgroup: "/runbox/runbox-1",
		initArgs: []string{"--relay"}, labels: map[string]string{sandbox.LabelManaged: "true"}})
	p := s.Process
	if p.User.UID != 1000 || p.User.GID != 1000 {
		t.Errorf("user %+v, want the manifest's 1000:1000", p.User)
	}
	c := p.Capabilities
	if c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities %+v, want none", c)
	}
	if !p.NoNewPrivileges {
		t.Error("no_new_privs is off")
	}
	if !s.Root.Readonly || s.Root.Path != "/images/x" {
		t.Errorf("root %+v, want the image read-only", s.Root)
	}
	if !slices.Equal(p.Args, []string{sandbox.InitPath, "--relay"}) {
		t.Errorf("args %v", p.Args)
	}
	var ns []specs.LinuxNamespaceType
	for _, n := range s.Linux.Namespaces {
		if n.Path != "" {
			t.Errorf("namespace %s joins %s, want a new one", n.Type, n.Path)
		}
		ns = append(ns, n.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.NetworkNamespace, specs.PIDNamespace, specs.MountNamespace, specs.IPCNamespace, specs.UTSNamespace} {
		if !slices.Contains(ns, want) {
			t.Errorf("no %s namespace: the box would share the host's", want)
		}
	}
	sc := s.Linux.Seccomp
	if sc == nil || sc.DefaultAction == specs.ActAllow || len(sc.Syscalls) == 0 {
		t.Fatalf("seccomp %+v, want the profile's allow-list", sc)
	}
	for _, r := range sc.Syscalls {
		if r.Action == specs.ActAllow && slices.ContainsFunc(r.Names, func(n string) bool { return n == "ptrace" || n == "mount" || n == "bpf" }) {
			t.Errorf("the filter allows %v with no capability", r.Names)
		}
	}
	if d := s.Linux.Resources.Devices; len(d) == 0 || d[0].Allow || d[0].Access != "rwm" {
		t.Errorf("device cgroup %+v, want deny-all first", d)
	}
	r := s.Linux.Resources
	if *r.Memory.Limit != 512<<20 || *r.Memory.Swap != *r.Memory.Limit || r.Pids.Limit != 128 || *r.CPU.Quota != cpuPeriod {
		t.Errorf("resources %+v %+v %+v", *r.Memory, *r.Pids, *r.CPU)
	}
	if !slices.Contains(s.Linux.MaskedPaths, "/proc/kcore") || !slices.Contains(s.Linux.ReadonlyPaths, "/proc/sys") {
		t.Errorf("masked %v, read-only %v", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	mounts := map[string]specs.Mount{}
	for _, mt := range s.Mounts {
		mounts[mt.Destination] = mt
	}
	for _, dest := range []string{manifest.Workspace, manifest.Tmp} {
		o := mounts[dest].Options
		for _, want := range []string{"noexec", "nosuid", "nodev", "nr_inodes=16384"} {
			if !slices.Contains(o, want) {
				t.Errorf("%s: %v, without %s", dest, o, want)
			}
		}
	}
	if o := mounts[sandbox.InitDir].Options; mounts[sandbox.InitDir].Source != "/run/init" || !slices.Contains(o, "ro") {
		t.Errorf("runbox-init's mount %+v, want a read-only bind", mounts[sandbox.InitDir])
	}
	if _, ok := mounts["/dev/shm"]; ok {
		t.Error("/dev/shm is mounted: it would be a third writable place")
	}
	if s.Annotations[sandbox.LabelManaged] != "true" {
		t.Errorf("annotations %v, want the box's labels", s.Annotations)
	}
	if s.Linux.Resources.CPU.Shares != nil {
		t.Error("a cold box has a CPU weight of its own")
	}
}

// TestBoxSpecFoldersAndWeight: declared folders and a client's roots are
// read-only, nosuid, nodev, noexec binds without the host's submounts; a pooled box starts at
// the pooled weight.
func TestBoxSpecFoldersAndWeight(t *testing.T) {
	s := testSpec(t, func(m *manifest.Manifest) {
		m.Mounts = []manifest.Mount{{Name: "data", Path: "/srv/data"}}
	}, specParams{rootfs: "/r", initDir: "/i", cgroup: "/runbox/x", shares: pooledCPUShares,
		mounts: []sandbox.HostMount{{Source: "/home/u/proj", Target: "/mnt/roots/proj"}}})
	for _, want := range [][2]string{{"/srv/data", "/mnt/data"}, {"/home/u/proj", "/mnt/roots/proj"}} {
		i := slices.IndexFunc(s.Mounts, func(mt specs.Mount) bool { return mt.Destination == want[1] })
		if i < 0 {
			t.Errorf("no mount at %s", want[1])
			continue
		}
		mt := s.Mounts[i]
		if mt.Source != want[0] || !slices.Equal(mt.Options, []string{"bind", "ro", "nosuid", "nodev", "noexec", "rprivate"}) {
			t.Errorf("%s: %+v, want a read-only, nosuid, nodev, noexec, non-recursive bind of %s", want[1], mt, want[0])
		}
	}
	if sh := s.Linux.Resources.CPU.Shares; sh == nil || *sh != pooledCPUShares {
		t.Errorf("a pooled box's CPU shares %v, want %d", sh, pooledCPUShares)
	}
}

func TestBoxSpecRefusesANamedUser(t *testing.T) {
	m := manifest.Default()
	m.User = "nobody"
	if _, err := boxSpec(m, specParams{}); err == nil {
		t.Fatal("a user name was taken: runc needs numbers")
	}
}

// TestBoxSpecGVisorHasNoPidsCgroup: under runsc the pids cgroup holds the
// whole sandbox (its kernel's threads, a host stub per process), so a
// limit sized for the box's processes kills gVisor on a short pipeline;
// RLIMIT_NPROC is the box's limit there. runc keeps the cgroup's.
func TestBoxSpecGVisorHasNoPidsCgroup(t *testing.T) {
	g := testSpec(t, func(m *manifest.Manifest) { m.Isolation = manifest.IsolationGVisor }, specParams{rootfs: "/images/x", initDir: "/run/init", cgroup: "/runbox/runbox-1"})
	if r := g.Linux.Resources; r.Pids != nil {
		t.Errorf("gvisor spec has a pids limit %d, want none", r.Pids.Limit)
	}
	if r := g.Linux.Resources; r.Memory == nil || r.Memory.Limit == nil || r.CPU == nil || r.CPU.Quota == nil {
		t.Errorf("gvisor spec lost its memory or CPU limit: %+v", r)
	}
	c := testSpec(t, nil, specParams{rootfs: "/images/x", initDir: "/run/init", cgroup: "/runbox/runbox-1"})
	if r := c.Linux.Resources; r.Pids == nil || r.Pids.Limit != manifest.Default().Limits.Pids {
		t.Errorf("runc spec pids %+v, want the manifest's limit", r.Pids)
	}
}
