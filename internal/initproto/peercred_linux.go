//go:build linux

package initproto

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// PeerCred is what the kernel recorded of unix socket c's peer
// (SO_PEERCRED): on a connection a listener accepted, its dialer; on one
// dialed, the listener. The pid is as the caller's pid namespace sees it.
// The box's sockets (the relay, the direct socket) judge their peers by
// it, and the server the socket it dialed.
func PeerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
