package linuxbox

import "golang.org/x/sys/unix"

// syscallNames names the calls the seccomp profile kills (see
// internal/seccompgen.Kill), on the server's architecture.
var syscallNames = map[int]string{
	unix.SYS_PTRACE:            "ptrace",
	unix.SYS_PROCESS_VM_READV:  "process_vm_readv",
	unix.SYS_PROCESS_VM_WRITEV: "process_vm_writev",
	unix.SYS_BPF:               "bpf",
	unix.SYS_PERF_EVENT_OPEN:   "perf_event_open",
	unix.SYS_USERFAULTFD:       "userfaultfd",
	unix.SYS_KEYCTL:            "keyctl",
	unix.SYS_ADD_KEY:           "add_key",
	unix.SYS_REQUEST_KEY:       "request_key",
	unix.SYS_MOUNT:             "mount",
	unix.SYS_UMOUNT2:           "umount2",
	unix.SYS_PIVOT_ROOT:        "pivot_root",
	unix.SYS_FSOPEN:            "fsopen",
	unix.SYS_FSCONFIG:          "fsconfig",
	unix.SYS_FSMOUNT:           "fsmount",
	unix.SYS_FSPICK:            "fspick",
	unix.SYS_MOVE_MOUNT:        "move_mount",
	unix.SYS_OPEN_TREE:         "open_tree",
	unix.SYS_MOUNT_SETATTR:     "mount_setattr",
	unix.SYS_UNSHARE:           "unshare",
	unix.SYS_SETNS:             "setns",
	unix.SYS_KEXEC_LOAD:        "kexec_load",
	unix.SYS_KEXEC_FILE_LOAD:   "kexec_file_load",
	unix.SYS_INIT_MODULE:       "init_module",
	unix.SYS_FINIT_MODULE:      "finit_module",
	unix.SYS_DELETE_MODULE:     "delete_module",
	unix.SYS_OPEN_BY_HANDLE_AT: "open_by_handle_at",
	unix.SYS_NAME_TO_HANDLE_AT: "name_to_handle_at",
	unix.SYS_IO_URING_SETUP:    "io_uring_setup",
	unix.SYS_IO_URING_ENTER:    "io_uring_enter",
	unix.SYS_IO_URING_REGISTER: "io_uring_register",
}
