package boxinit

import (
	"io"
	"net"
	"sync"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// proxy is runbox-init's HTTP proxy: it listens on the box's loopback and
// carries each connection, byte for byte, on a stream of its own to the
// server, which reads the request, decides, connects and answers (package
// egress). Nothing here parses what the program sends: code in the box is
// hostile, and everything that decides happens outside it.
type proxy struct {
	ln   net.Listener
	open func() (net.Conn, error)
	wg   sync.WaitGroup
	mu   sync.Mutex
	live map[net.Conn]struct{}
}

// startProxy listens on addr and serves until stop.
func startProxy(addr string, open func() (net.Conn, error)) (*proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, open: open, live: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.carry(c)
		}()
	}
}

// carry relays one connection over one stream; each side's end of input
// is passed on as a half-close, and the connection ends when both did.
func (p *proxy) carry(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	defer c.Close()
	st, err := p.open()
	if err != nil {
		// The channel is gone: the program sees its connection closed.
		return
	}
	p.track(st, true)
	defer p.track(st, false)
	defer st.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, st)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	// A yamux stream's Close is a half-close: the answer still arrives.
	_, _ = io.Copy(st, c)
	_ = st.Close()
	<-done
}

func (p *proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.live[c] = struct{}{}
	} else {
		delete(p.live, c)
	}
}

// stop closes the listener and every connection, and waits for them.
func (p *proxy) stop() {
	if p == nil {
		return
	}
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.live {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// serveNetwork starts the job's proxy, when it has one, carrying its
// connections on proxy streams of sess; nil when the job has none.
func serveNetwork(sess *yamux.Session, job *initproto.Job) (*proxy, error) {
	if job.Proxy == "" {
		return nil, nil
	}
	return startProxy(job.Proxy, func() (net.Conn, error) {
		st, err := sess.OpenStream()
		if err != nil {
			return nil, err
		}
		if err := initproto.Send(st, initproto.Header{Kind: initproto.StreamProxy}); err != nil {
			_ = st.Close()
			return nil, err
		}
		return st, nil
	})
}
