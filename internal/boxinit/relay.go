//go:build linux

package boxinit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// relay is the box's way in once its stdin has ended (internal/initproto
// relay.go): the connections of `runbox-init relay` processes on its
// abstract socket, bound before the program starts so that nothing in the
// box can take the name.
type relay struct {
	l      net.Listener
	open   chan struct{}
	opened sync.Once
	conns  chan net.Conn
	// root says whether a connection comes from uid 0 (the relay the
	// server execs; the program runs under a non-root uid).
	root func(net.Conn) bool
}

// listenRelay listens on name, taking the connections root says come
// from uid 0 (fromRoot).
func listenRelay(name string, root func(net.Conn) bool) (*relay, error) {
	l, err := net.Listen("unix", name)
	if err != nil {
		return nil, err
	}
	r := &relay{l: l, open: make(chan struct{}), conns: make(chan net.Conn), root: root}
	go r.accept()
	return r, nil
}

// accept answers each connection: refused unless uid 0's; busy while
// stdin is open; else the box's channel, replacing the one before.
func (r *relay) accept() {
	var last net.Conn
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		if !r.root(c) {
			_ = c.Close()
			continue
		}
		select {
		case <-r.open:
		default:
			_, _ = c.Write([]byte{initproto.RelayBusy})
			_ = c.Close()
			continue
		}
		if _, err := c.Write([]byte{initproto.RelayReady}); err != nil {
			_ = c.Close()
			continue
		}
		if last != nil {
			_ = last.Close()
		}
		last = c
		r.conns <- c
	}
}

// channels serves the relay's connections in turn, from now on (stdin has
// ended), as channelsOn serves stdin's; it returns when a server ends a
// channel for good and final.
func (r *relay) channels(final bool, serve func(*yamux.Session)) error {
	r.opened.Do(func() { close(r.open) })
	for c := range r.conns {
		err := channelsOn(c, c, final, serve)
		_ = c.Close()
		if errors.Is(err, initproto.ErrEnded) {
			return err
		}
	}
	return nil
}

func fromRoot(c net.Conn) bool {
	cred, err := initproto.PeerCred(c)
	return err == nil && cred.Uid == 0
}

// relayMain is `runbox-init relay`: it joins stdin and stdout to the box's
// relay socket and returns when either side ends.
func relayMain(in io.Reader, out io.Writer, name string) int {
	// Nothing in the box may read or write our memory: what passes here
	// is the box's channel.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	c, err := net.Dial("unix", name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init relay:", err)
		return 1
	}
	go func() {
		_, _ = io.Copy(c, in)
		_ = c.(*net.UnixConn).CloseWrite()
	}()
	_, _ = io.Copy(out, c)
	return 0
}
