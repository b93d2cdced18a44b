//go:build !linux

package docker

import (
	"context"
	"errors"
	"net"
	"time"
)

// DirectChannels: only a Linux host reaches a box's network namespace
// (direct_linux.go).
func (d *Docker) DirectChannels() bool { return false }

func (d *Docker) dialDirect(context.Context, string, time.Duration, <-chan struct{}) (net.Conn, func() (net.Conn, error), error) {
	return nil, nil, errors.New("no direct channel on this platform")
}
