//go:build !linux

package linuxbox

import (
	"context"
	"time"
)

// KernelLog is Linux-only: elsewhere the engine's kernel log is not ours,
// and FollowKernelLog's nil answers nothing.
type KernelLog struct{}

// FollowKernelLog returns nil: there is no kernel log to read here.
func FollowKernelLog(context.Context) *KernelLog { return nil }

// Syscall returns "": no call can be named here.
func (*KernelLog) Syscall(time.Time, time.Time, int, string, time.Duration) string { return "" }

// OOMKilled returns false: no OOM kill can be seen here.
func (*KernelLog) OOMKilled(string, time.Duration) bool { return false }
