package contract

import "strings"

// SyscallGroup is a set of system calls the sandbox kills a program for,
// and what a program would use them for.
type SyscallGroup struct {
	Purpose string
	Calls   []string
}

// ForbiddenSyscalls is the one list of the system calls whose use kills the
// program (forbidden_syscall): the seccomp profile is rendered from it
// (internal/seccompgen), the forbidden_syscall hint names its purposes, and
// docs/security.md is tested against it.
var ForbiddenSyscalls = []SyscallGroup{
	{"debug or trace processes (ptrace)", []string{"ptrace", "process_vm_readv", "process_vm_writev"}},
	{"load BPF programs or use perf or userfaultfd", []string{"bpf", "perf_event_open", "userfaultfd"}},
	{"use kernel keyrings", []string{"keyctl", "add_key", "request_key"}},
	{"mount file systems", []string{"mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr"}},
	{"unshare or enter namespaces", []string{"unshare", "setns"}},
	{"load a kernel or kernel modules", []string{"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"}},
	{"open files by handle", []string{"open_by_handle_at", "name_to_handle_at"}},
	{"use io_uring", []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
}

// ForbiddenSyscallNames lists every call of ForbiddenSyscalls, in order.
func ForbiddenSyscallNames() []string {
	var names []string
	for _, g := range ForbiddenSyscalls {
		names = append(names, g.Calls...)
	}
	return names
}

func forbiddenPurposes() string {
	p := make([]string, len(ForbiddenSyscalls))
	for i, g := range ForbiddenSyscalls {
		p[i] = g.Purpose
	}
	return strings.Join(p[:len(p)-1], ", ") + ", " + p[len(p)-1]
}
