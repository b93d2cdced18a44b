//go:build !linux

package docker

import (
	"context"
	"time"
)

// seccompLog is Linux-only: elsewhere the engine's kernel log is not ours.
type seccompLog struct{}

func followSeccompLog(context.Context) *seccompLog { return nil }

func (*seccompLog) find(time.Time, time.Time, int, string, time.Duration) string { return "" }

func (*seccompLog) oomKilled(string, time.Duration) bool { return false }
