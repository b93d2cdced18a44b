package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// sessionChannel is the server's side of a session box's channel. It
// outlives the calls made over it, so the streams the box opens go
// through one accept loop, for the channel's life, to the running call's
// boxStreams: its artifacts to its collector, its tool calls and proxied
// connections to its handlers, under its bounds, as in a one-off run. A
// stream opened while no call runs (a process a cell left behind, or a
// call's straggler) is refused: never served with another call's handlers.
type sessionChannel struct {
	conn Conn
	mux  *yamux.Session
	// done is closed when the accept loop ends (the channel is gone).
	done chan struct{}

	mu sync.Mutex
	// call serves the running call's streams; nil between calls.
	call *boxStreams
	// refused counts the streams refused since the last call began.
	refused int
}

// newSessionChannel serves mux's box-opened streams until it closes.
func newSessionChannel(conn Conn, mux *yamux.Session) *sessionChannel {
	c := &sessionChannel{conn: conn, mux: mux, done: make(chan struct{})}
	go c.accept()
	return c
}

// maxIdleStreams bounds the streams a box may open between two calls
// before its channel is closed (the next call opens a new one; the
// session's state, in the box, is kept).
const maxIdleStreams = initproto.MaxBoxStreams

func (c *sessionChannel) accept() {
	defer close(c.done)
	for {
		st, err := c.mux.AcceptStream()
		if err != nil {
			return
		}
		c.mu.Lock()
		call := c.call
		ok := true
		if call != nil {
			ok = call.admit(st)
		} else {
			c.refused++
			ok = c.refused <= maxIdleStreams
			refuse(st)
		}
		c.mu.Unlock()
		if !ok {
			_ = c.mux.Close()
			return
		}
	}
}

// begin makes a call's boxStreams the channel's: from now on the streams
// the box opens are the call's, served with s under the call's bounds,
// until finish.
func (c *sessionChannel) begin(ctx context.Context, l manifest.Limits, s *initproto.Streams) *boxStreams {
	b := newBoxStreams(ctx, l, s)
	b.sess = c.mux
	// A random Call names the job; the box's streams for it carry it, so
	// one of an earlier call that arrives late is told apart.
	var n [8]byte
	_, _ = rand.Read(n[:])
	b.call = binary.BigEndian.Uint64(n[:]) | 1
	c.mu.Lock()
	c.call, c.refused = b, 0
	c.mu.Unlock()
	return b
}

// finish ends b's turn: streams opened from now on are refused, b's
// handlers are cancelled and its streams released.
func (c *sessionChannel) finish(b *boxStreams) {
	c.mu.Lock()
	if c.call == b {
		c.call = nil
	}
	c.mu.Unlock()
	b.end()
}

func (c *sessionChannel) close() {
	_ = c.mux.Close()
	_ = c.conn.Close()
}
