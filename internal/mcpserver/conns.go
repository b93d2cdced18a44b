package mcpserver

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

const (
	// idleTimeout closes a keep-alive connection that sends no new
	// request.
	idleTimeout = 60 * time.Second
	// headerTimeout bounds the reading of a request's head.
	headerTimeout = 10 * time.Second
)

// connCaps bounds the connections the HTTP listener holds: at most
// perAddress open from one client address, and at most unauthenticated
// open on which no request has yet shown a valid token (0: no such cap,
// the listener takes no token). A connection past a cap is closed as it
// is accepted, so that holding connections open costs a client its own
// slots and never the server's memory or other clients' connections.
type connCaps struct {
	net.Listener
	perAddress, unauthenticated int
	refusals                    *refusals

	mu      sync.Mutex
	byAddr  map[string]int
	unauthN int
}

func newConnCaps(ln net.Listener, perAddress, unauthenticated int, f *refusals) *connCaps {
	return &connCaps{Listener: ln, perAddress: perAddress, unauthenticated: unauthenticated, refusals: f, byAddr: map[string]int{}}
}

// Accept returns the next connection within the caps.
func (c *connCaps) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
		if err != nil {
			host = conn.RemoteAddr().String()
		}
		reason := ""
		c.mu.Lock()
		switch {
		case c.perAddress > 0 && c.byAddr[host] >= c.perAddress:
			reason = refusedPerAddress
		case c.unauthenticated > 0 && c.unauthN >= c.unauthenticated:
			reason = refusedUnauthenticated
		default:
			c.byAddr[host]++
			c.unauthN++
		}
		c.mu.Unlock()
		if reason != "" {
			_ = conn.Close()
			c.refusals.note(reason, conn.RemoteAddr().String())
			continue
		}
		return &cappedConn{Conn: conn, caps: c, host: host}, nil
	}
}

// cappedConn is a connection counted by its caps until it closes.
type cappedConn struct {
	net.Conn
	caps *connCaps
	host string
	// authenticated and closed are guarded by caps.mu.
	authenticated, closed bool
}

// authenticate takes the connection off the unauthenticated ones: a
// request on it showed a valid token.
func (c *cappedConn) authenticate() {
	c.caps.mu.Lock()
	defer c.caps.mu.Unlock()
	if !c.authenticated && !c.closed {
		c.authenticated = true
		c.caps.unauthN--
	}
}

func (c *cappedConn) Close() error {
	c.caps.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.caps.byAddr[c.host]--; c.caps.byAddr[c.host] <= 0 {
			delete(c.caps.byAddr, c.host)
		}
		if !c.authenticated {
			c.caps.unauthN--
		}
	}
	c.caps.mu.Unlock()
	return c.Conn.Close()
}

// connKey carries the request's connection in its context.
type connKey struct{}

// withConn is the http.Server's ConnContext: it lets the bearer check
// mark the connection authenticated.
func withConn(ctx context.Context, conn net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, conn)
}

// authenticated marks the connection of a request whose token was valid.
func authenticated(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*cappedConn); ok {
		c.authenticate()
	}
}

// stallTimeout is how long one write to a client may wait for the client
// to read: a connection whose client reads nothing for this long is
// closed, while an answer or stream that the client reads, however long
// it lasts, is never cut.
const stallTimeout = 60 * time.Second

// stallGuard gives each write of a response its own deadline (a blunt
// server WriteTimeout would cut a run_code call that answers after
// minutes, and every task's event stream).
type stallGuard struct {
	http.ResponseWriter
	rc *http.ResponseController
}

// guardStalls serves every request of the listener with its writes
// bounded, from the start: a keep-alive connection must not keep the
// deadline of its previous answer.
func guardStalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(stallTimeout))
		next.ServeHTTP(stallGuard{ResponseWriter: w, rc: rc}, r)
	})
}

func (s stallGuard) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(stallTimeout))
	return s.ResponseWriter.Write(p)
}

func (s stallGuard) Flush() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(stallTimeout))
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s stallGuard) Unwrap() http.ResponseWriter { return s.ResponseWriter }
