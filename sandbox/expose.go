package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// A session's box may be reached from the host, one connection at a time,
// over its own channel: the server opens an initproto.StreamExpose stream
// that runbox-init connects to a port on the box's loopback. The box still
// has no interface but lo and no host socket; what listens on the host
// (and who may connect) is the caller's (package expose).

// SessionDialer opens connections into sessions' boxes.
type SessionDialer interface {
	// DialSession connects to 127.0.0.1:port inside client's session
	// id's box; a session that is not client's is ErrNoSession.
	DialSession(ctx context.Context, id, client string, port int) (net.Conn, error)
	// SessionDone is closed when client's session id ends (closed,
	// expired, lost, or the server shut down); false when there is no
	// such session of client's.
	SessionDone(ctx context.Context, id, client string) (<-chan struct{}, bool)
}

var _ SessionDialer = (*BoxRunner)(nil)

// ErrNoSession is a session id that is not the caller's open session.
var ErrNoSession = errors.New("no such open session of yours")

// exposeWindow is what the box may have sent on one exposed connection
// and the server not read yet: a stream's largest window with its framing.
// It is granted beside the calls' bytes, and every byte read is granted
// again, so that a long download through an exposure never counts against
// a cell's bound while the box can never send more than it was allowed.
const exposeWindow = 1<<20 + 64<<10

// exposeAnswerWait bounds runbox-init's answer on a new exposed connection.
const exposeAnswerWait = 15 * time.Second

// SessionDone is closed when client's session id ends.
func (r *BoxRunner) SessionDone(ctx context.Context, id, client string) (<-chan struct{}, bool) {
	ls, _ := r.sessionsOf().find(ctx, id, client)
	if ls == nil {
		return nil, false
	}
	return ls.doneChan(), true
}

// DialSession connects to 127.0.0.1:port inside client's session id's box
// over the session's channel.
func (r *BoxRunner) DialSession(ctx context.Context, id, client string, port int) (net.Conn, error) {
	ls, gone := r.sessionsOf().find(ctx, id, client)
	if ls == nil {
		if gone != "" {
			return nil, fmt.Errorf("the session is gone: %s", gone)
		}
		return nil, ErrNoSession
	}
	// A person using the preview uses the session: it is not idle.
	r.sessionsOf().touch(ls)
	ch := ls.live.Load()
	if ch == nil || ch.closed() {
		return nil, errors.New("the session's channel is not open now (its last call broke it); the next run_code call in the session opens it again")
	}
	ch.counted.stand(exposeWindow)
	st, err := ch.mux.OpenStream()
	if err != nil {
		ch.counted.stand(-exposeWindow)
		return nil, fmt.Errorf("opening a stream to the box: %w", err)
	}
	_ = st.SetDeadline(time.Now().Add(exposeAnswerWait))
	conn := &exposedConn{Stream: st, counted: ch.counted}
	if err := initproto.SendExpose(st, port); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("asking the box: %w", err)
	}
	if err := initproto.ReadExposeAnswer(st); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("the box could not connect to its port %d: %w", port, err)
	}
	_ = st.SetDeadline(time.Time{})
	return conn, nil
}

// exposedConn is one exposed connection's stream: what it reads is granted
// again on the channel's count.
type exposedConn struct {
	*yamux.Stream
	counted *countingConn
	once    sync.Once
}

func (c *exposedConn) Read(p []byte) (int, error) {
	n, err := c.Stream.Read(p)
	if n > 0 {
		// The bytes and the frame headers that carried them.
		c.counted.grant(int64(n) + 64)
	}
	return n, err
}

func (c *exposedConn) Write(p []byte) (int, error) {
	n, err := c.Stream.Write(p)
	// The window updates the box answers with.
	c.counted.grant(64)
	return n, err
}

// CloseWrite ends what the server sends; the box may still answer.
func (c *exposedConn) CloseWrite() error { return c.Stream.Close() }

// Close ends the connection both ways at once.
func (c *exposedConn) Close() error {
	c.once.Do(func() {
		_ = c.Stream.SetReadDeadline(time.Now())
		_ = c.Stream.Close()
		c.counted.stand(-exposeWindow)
	})
	return nil
}

// doneChan is closed when the session ends.
func (ls *liveSession) doneChan() <-chan struct{} {
	ls.doneOnce.Do(func() { ls.done = make(chan struct{}) })
	return ls.done
}

// ended closes the session's done channel; under sessions.mu, once.
func (ls *liveSession) ended() {
	ls.doneChan()
	select {
	case <-ls.done:
	default:
		close(ls.done)
	}
}

// stand grants n more bytes now and keeps them across calls' bounds (a
// negative n ends a standing grant, which the next bound drops).
func (c *countingConn) stand(n int64) {
	c.mu.Lock()
	c.standing += n
	if n > 0 {
		c.max += n
	}
	c.mu.Unlock()
}

// touch marks the session used now.
func (s *sessions) touch(ls *liveSession) {
	s.mu.Lock()
	ls.lastUsed = time.Now()
	s.mu.Unlock()
}
