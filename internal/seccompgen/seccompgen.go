//go:build linux

package seccompgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	moby "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/runbox-mcp/runbox/contract"
	"golang.org/x/sys/unix"
)

// Kill lists the system calls that kill the whole process: each one is a
// known way out of a container or into the kernel's rarely-audited corners,
// and no interpreter's normal work needs it. The box reports such a death as
// forbidden_syscall. The list is the contract's (contract.ForbiddenSyscalls),
// so the profile, the error's hint and the docs cannot drift apart.
var Kill = contract.ForbiddenSyscallNames()

// Drop lists what moby's default allows but an interpreter never needs; they
// return EPERM like everything else that is not allowed.
var Drop = map[string]string{
	"modify_ldt":    "16-bit segments: only old DOS/Wine code uses them, and they were an exploit primitive",
	"io_setup":      "kernel AIO: no interpreter here uses it (their I/O is blocking or thread-pooled)",
	"io_submit":     "kernel AIO",
	"io_getevents":  "kernel AIO",
	"io_pgetevents": "kernel AIO",
	"io_cancel":     "kernel AIO",
	"io_destroy":    "kernel AIO",
	"vmsplice":      "page-splicing into pipes: the primitive of several kernel exploits, unused by interpreters",
}

// socketRules replace moby's socket rules (dozens of address families):
// an interpreter needs local and IP sockets, and netlink for getifaddrs;
// every other family (packet, RDS, TIPC, CAN, Bluetooth, ALG, VSOCK...) is
// kernel attack surface with no use in a box without a network.
var socketRules = []Rule{
	{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: unix.AF_INET + 1, Op: specs.OpLessThan}},
		Comment: "runbox: AF_UNIX and AF_INET (AF_UNSPEC cannot be created)"},
	{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: unix.AF_INET6, Op: specs.OpEqualTo}}},
	{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: unix.AF_NETLINK, Op: specs.OpEqualTo}}},
}

// FileName is the committed profile's name for arch at an isolation level.
func FileName(goarch string, gvisor bool) string {
	if gvisor {
		return goarch + "-gvisor.json"
	}
	return goarch + ".json"
}

// Arch names one native architecture for the profile.
type Arch struct {
	GoArch  string     // "amd64"
	Seccomp specs.Arch // SCMP_ARCH_X86_64
}

// Arches are the architectures runbox renders a profile for.
var Arches = []Arch{
	{"amd64", specs.ArchX86_64},
	{"arm64", specs.ArchAARCH64},
}

// Profile is the subset of Docker's profile format that runbox passes.
type Profile struct {
	DefaultAction   specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet *uint                    `json:"defaultErrnoRet,omitempty"`
	Architectures   []specs.Arch             `json:"architectures"`
	Syscalls        []Rule                   `json:"syscalls"`
}

// Rule is one group of system calls with one action.
type Rule struct {
	Names    []string                 `json:"names"`
	Action   specs.LinuxSeccompAction `json:"action"`
	Args     []specs.LinuxSeccompArg  `json:"args,omitempty"`
	ErrnoRet *uint                    `json:"errnoRet,omitempty"`
	Comment  string                   `json:"comment,omitempty"`
}

// Render returns the profile for one architecture as indented JSON. The
// gVisor variant works around runsc's (2022) reading of OCI profiles: it
// knows no SCMP_ACT_KILL_PROCESS and ignores errnoRet (so clone3 cannot
// answer ENOSYS, and glibc would not fall back to clone). There the
// dangerous calls trap (SIGSYS, whose default action ends the whole
// process) and clone3 is allowed: namespaces made inside gVisor stay in
// its user-space kernel.
func Render(arch Arch, gvisor bool) ([]byte, error) {
	def := moby.DefaultProfile()
	p := Profile{
		DefaultAction:   def.DefaultAction,
		DefaultErrnoRet: def.DefaultErrnoRet,
		// Only the native ABI: no 32-bit int 0x80, no x32.
		Architectures: []specs.Arch{arch.Seccomp},
	}
	killed := map[string]bool{}
	for _, n := range Kill {
		killed[n] = true
	}
	for _, s := range def.Syscalls {
		if !applies(s, arch.GoArch) || slices.Equal(s.Names, []string{"socket"}) {
			continue
		}
		names := slices.DeleteFunc(slices.Clone(s.Names), func(n string) bool { return killed[n] || Drop[n] != "" })
		if len(names) == 0 {
			continue
		}
		r := Rule{Names: names, Action: s.Action, Args: s.Args, ErrnoRet: s.ErrnoRet, Comment: s.Comment}
		if gvisor && slices.Equal(names, []string{"clone3"}) {
			r = Rule{Names: names, Action: specs.ActAllow, Comment: "runbox, gVisor: runsc ignores errnoRet, so ENOSYS cannot be returned"}
		}
		p.Syscalls = append(p.Syscalls, r)
	}
	kill := specs.ActKillProcess
	if gvisor {
		kill = specs.ActTrap
	}
	p.Syscalls = append(p.Syscalls, socketRules...)
	p.Syscalls = append(p.Syscalls, Rule{
		Names:   Kill,
		Action:  kill,
		Comment: "runbox: container escapes and kernel attack surface; the process dies and the run is forbidden_syscall",
	})
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("seccomp profile for %s: %w", arch.GoArch, err)
	}
	return b.Bytes(), nil
}

// applies expands moby's conditions the way the engine does for a box with
// no capabilities on goarch and a current kernel (every minimum kernel in
// the default is met by the kernels runbox supports).
func applies(s *moby.Syscall, goarch string) bool {
	if ex := s.Excludes; ex != nil && (slices.Contains(ex.Arches, goarch) || ex.MinKernel != nil) {
		return false
	}
	if in := s.Includes; in != nil && (len(in.Caps) > 0 || len(in.Arches) > 0 && !slices.Contains(in.Arches, goarch)) {
		return false
	}
	return true
}
