//go:build linux

package seccompgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The committed profiles are what this code renders; UPDATE_SECCOMP=true
// rewrites them after a deliberate change (here or in moby's default).
func TestCommittedProfilesAreCurrent(t *testing.T) {
	for _, a := range Arches {
		for _, gvisor := range []bool{false, true} {
			checkCommitted(t, a, gvisor)
		}
	}
}

func checkCommitted(t *testing.T, a Arch, gvisor bool) {
	t.Helper()
	want, err := Render(a, gvisor)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "sandbox", "linuxbox", "seccomp", FileName(a.GoArch, gvisor))
	if os.Getenv("UPDATE_SECCOMP") == "true" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run UPDATE_SECCOMP=true go test ./internal/seccompgen", path)
	}
}

func render(t *testing.T, a Arch, gvisor bool) Profile {
	t.Helper()
	b, err := Render(a, gvisor)
	if err != nil {
		t.Fatal(err)
	}
	var p Profile
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// actions maps each named system call to the actions of its rules.
func actions(p Profile) map[string][]specs.LinuxSeccompAction {
	m := map[string][]specs.LinuxSeccompAction{}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			m[n] = append(m[n], r.Action)
		}
	}
	return m
}

func TestProfileShape(t *testing.T) {
	p := render(t, Arches[0], false)
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("default action %s, want errno", p.DefaultAction)
	}
	if !slices.Equal(p.Architectures, []specs.Arch{specs.ArchX86_64}) {
		t.Errorf("architectures %v: only the native ABI, no int 0x80 or x32", p.Architectures)
	}
	acts := actions(p)
	for _, n := range Kill {
		if !slices.Equal(acts[n], []specs.LinuxSeccompAction{specs.ActKillProcess}) {
			t.Errorf("%s: %v, want only kill_process", n, acts[n])
		}
	}
	for n := range Drop {
		if len(acts[n]) != 0 {
			t.Errorf("%s is still in the profile: %v", n, acts[n])
		}
	}
	// What every interpreter needs is still allowed.
	for _, n := range []string{"read", "write", "openat", "mmap", "clone", "execve", "wait4", "futex", "epoll_wait", "socket", "arch_prctl", "rt_sigaction", "getrandom"} {
		if !slices.Contains(acts[n], specs.ActAllow) {
			t.Errorf("%s is not allowed", n)
		}
	}
	if len(acts["modify_ldt"]) != 0 || len(acts["s390_runtime_instr"]) != 0 {
		t.Error("another architecture's system calls leaked in")
	}
}

// socket is allowed only for local, IP and netlink sockets.
func TestSocketFamilies(t *testing.T) {
	p := render(t, Arches[0], false)
	allowed := func(family uint64) bool {
		for _, r := range p.Syscalls {
			if !slices.Contains(r.Names, "socket") || r.Action != specs.ActAllow {
				continue
			}
			if len(r.Args) == 0 {
				return true
			}
			a := r.Args[0]
			if a.Op == specs.OpEqualTo && family == a.Value || a.Op == specs.OpLessThan && family < a.Value {
				return true
			}
		}
		return false
	}
	for _, f := range []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK} {
		if !allowed(f) {
			t.Errorf("family %d is refused", f)
		}
	}
	for _, f := range []uint64{unix.AF_ALG, unix.AF_VSOCK, unix.AF_PACKET, unix.AF_RDS, unix.AF_TIPC, unix.AF_BLUETOOTH, unix.AF_KEY} {
		if allowed(f) {
			t.Errorf("family %d is allowed", f)
		}
	}
}

func TestGVisorVariant(t *testing.T) {
	p := render(t, Arches[0], true)
	acts := actions(p)
	for _, n := range Kill {
		if !slices.Equal(acts[n], []specs.LinuxSeccompAction{specs.ActTrap}) {
			t.Errorf("%s: %v, want only trap (runsc knows no kill_process)", n, acts[n])
		}
	}
	if !slices.Equal(acts["clone3"], []specs.LinuxSeccompAction{specs.ActAllow}) {
		t.Errorf("clone3: %v", acts["clone3"])
	}
	if q := render(t, Arches[0], false); len(q.Syscalls) != len(p.Syscalls) {
		t.Errorf("the variants differ in more than actions: %d rules vs %d", len(q.Syscalls), len(p.Syscalls))
	}
}
