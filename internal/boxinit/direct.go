//go:build linux

package boxinit

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// direct is a session box's way in from its own host (internal/initproto
// DirectSocket): connections from uid 0 on the box's abstract socket,
// bound before the interpreter starts so that nothing in the box can take
// the name, each served as stdin is, beside it, or as a channel's cell
// lane (internal/initproto lane.go).
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

// helloWait bounds the wait for a connection's first bytes.
const helloWait = 10 * time.Second

// channels serves each connection until the listener fails: a lane's
// (its hello) by lane, any other's channels by serve. A new channel's
// connection ends the one before: its server is gone (restarted), or is
// this one again, after the channel broke.
func (d *direct) channels(serve func(*yamux.Session), lane func(net.Conn, []byte)) {
	var mu sync.Mutex
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
		go func() {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(helloWait))
			token, read, err := initproto.ReadLaneHello(c)
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			if token != nil {
				lane(c, token)
				return
			}
			mu.Lock()
			if last != nil {
				_ = last.Close()
			}
			last = c
			mu.Unlock()
			_ = channelsOn(io.MultiReader(bytes.NewReader(read), c), c, false, serve)
		}()
	}
}
