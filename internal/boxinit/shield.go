//go:build linux

package boxinit

import (
	"errors"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The program may not signal PID 1. Linux drops the signals runbox-init
// ignores, and SIGKILL and SIGSTOP sent to a namespace's init from inside
// it; gVisor delivers SIGKILL, SIGSTOP and the signals left at their default
// action to PID 1 all the same, and the box would end without a report.
// So the trampoline gives the program a seccomp filter that refuses, with
// EPERM, every system call that signals a process by its pid when that pid
// is 1, and the two that can reach PID 1 otherwise (tkill, by a thread's
// id; pidfd_send_signal, through an open /proc/1). The filter is the
// program's, never runbox-init's, and adds to the box's own profile.

// Classic BPF, as seccomp takes it.
const (
	bpfLdAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfAndK   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	x32Bit    = 0x40000000 // amd64's x32 system calls: the same numbers, this bit set
	seccompNr = 0          // offsets in struct seccomp_data
	seccompAr = 4
	seccompA0 = 16
)

// pidSignalCalls take the target's pid as their first argument.
var pidSignalCalls = []uint32{unix.SYS_KILL, unix.SYS_TGKILL, unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_PIDFD_OPEN}

// otherSignalCalls reach a process other than by its pid.
var otherSignalCalls = []uint32{unix.SYS_TKILL, unix.SYS_PIDFD_SEND_SIGNAL}

func nativeAudit() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// shieldFilter is the program's filter. A call of another architecture (the
// 32-bit ABI) is left to the box's profile, which refuses that ABI.
func shieldFilter(arch uint32) []unix.SockFilter {
	type insn struct {
		code   uint16
		k      uint32
		jt, jf string // labels; "" is the next instruction
		label  string
	}
	p := []insn{
		{code: bpfLdAbs, k: seccompAr},
		{code: bpfJeqK, k: arch, jf: "allow"},
		{code: bpfLdAbs, k: seccompNr},
		{code: bpfAndK, k: ^uint32(x32Bit)},
	}
	for _, nr := range pidSignalCalls {
		p = append(p, insn{code: bpfJeqK, k: nr, jt: "pid"})
	}
	for _, nr := range otherSignalCalls {
		p = append(p, insn{code: bpfJeqK, k: nr, jt: "deny"})
	}
	p = append(p,
		insn{code: bpfRetK, k: retAllow},
		// The pid is an int: 1 is 1 in the low word and 0 in the high one.
		insn{code: bpfLdAbs, k: seccompA0, label: "pid"},
		insn{code: bpfJeqK, k: 1, jf: "allow"},
		insn{code: bpfLdAbs, k: seccompA0 + 4},
		insn{code: bpfJeqK, k: 0, jt: "deny", jf: "allow"},
		insn{code: bpfRetK, k: retEPERM, label: "deny"},
		insn{code: bpfRetK, k: retAllow, label: "allow"},
	)
	at := map[string]int{}
	for i, in := range p {
		if in.label != "" {
			at[in.label] = i
		}
	}
	// Jumps go forward only: every label is after its jumps.
	rel := func(i int, label string) uint8 {
		if label == "" {
			return 0
		}
		return uint8(at[label] - i - 1)
	}
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		out[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: rel(i, in.jt), Jf: rel(i, in.jf)}
	}
	return out
}

// shieldPID1 installs the filter on the calling process, every thread of
// it; the caller execs the program next.
func shieldPID1() error {
	arch, ok := nativeAudit()
	if !ok {
		return errors.New("no seccomp filter for " + runtime.GOARCH)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	filter := shieldFilter(arch)
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno == syscall.EINVAL {
		// Without thread sync: the caller's thread, the one that execs.
		_, _, errno = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	}
	runtime.KeepAlive(filter)
	if errno != 0 {
		return errno
	}
	return nil
}
