package docker

import (
	"context"
	"time"
)

// KernelLog follows the kernel's records of seccomp and OOM kills, for a
// driver that is not an engine (sandbox/runc): the same reader the Docker
// driver names a forbidden call with.
type KernelLog struct{ l *seccompLog }

// FollowKernelLog reads the kernel log until ctx ends; where it cannot be
// read, its answers are empty.
func FollowKernelLog(ctx context.Context) *KernelLog {
	return &KernelLog{followSeccompLog(ctx)}
}

// Syscall names the call the filter killed a process of uid (and comm,
// when set) for between since and ended, waiting up to wait for the
// record; "" when none was seen.
func (k *KernelLog) Syscall(since, ended time.Time, uid int, comm string, wait time.Duration) string {
	return k.l.find(since, ended, uid, comm, wait)
}

// OOMKilled says whether the kernel's OOM killer acted in a memory cgroup
// whose path holds id, waiting up to wait for the record.
func (k *KernelLog) OOMKilled(id string, wait time.Duration) bool {
	return k.l.oomKilled(id, wait)
}
