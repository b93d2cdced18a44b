//go:build linux

package boxinit

import (
	"net"

	"github.com/hashicorp/yamux"
)

// direct is a session box's way in from its own host (internal/initproto
// DirectSocket): connections from uid 0 on the box's abstract socket,
// bound before the interpreter starts so that nothing in the box can take
// the name, each served as stdin is, beside it.
type direct struct {
	l    net.Listener
	root func(net.Conn) bool
}

func listenDirect(name string) (*direct, error) {
	l, err := net.Listen("unix", name)
	if err != nil {
		return nil, err
	}
	return &direct{l: l, root: fromRoot}, nil
}

// channels serves each connection's channels until the listener fails. A
// new connection ends the one before: its server is gone (restarted), or
// is this one again, after the channel broke.
func (d *direct) channels(serve func(*yamux.Session)) {
	var last net.Conn
	for {
		c, err := d.l.Accept()
		if err != nil {
			return
		}
		if !d.root(c) {
			_ = c.Close()
			continue
		}
		if last != nil {
			_ = last.Close()
		}
		last = c
		go func() {
			_ = channelsOn(c, c, false, serve)
			_ = c.Close()
		}()
	}
}
