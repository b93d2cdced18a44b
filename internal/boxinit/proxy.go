//go:build linux

package boxinit

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// stream is a connection's way to the host: a HostStream.
type stream interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// proxy is runbox-init's HTTP proxy: it listens on the box's loopback and
// carries each connection, byte for byte, on a stream of its own to the
// server, which reads the request, decides, connects and answers (package
// egress). Nothing here parses what the program sends: code in the box is
// hostile, and everything that decides happens outside it.
type proxy struct {
	ln   net.Listener
	open func() (stream, error)
	wg   sync.WaitGroup
	mu   sync.Mutex
	live map[io.Closer]struct{}
}

// startProxy listens on addr and serves until stop.
func startProxy(addr string, open func() (stream, error)) (*proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, open: open, live: map[io.Closer]struct{}{}}
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
		_, _ = copyLarge(c, st)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = copyLarge(st, c)
	_ = st.CloseWrite()
	<-done
}

// copyLarge copies in large pieces: each write to a stream is a frame of
// the box's channel, a trip through the engine's copies, so fewer and
// larger ones carry more per second (io.Copy would take 32 KiB, or the
// connection's own ReadFrom).
func copyLarge(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 256<<10))
}

func (p *proxy) track(c io.Closer, add bool) {
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

// networkService is the proxy as a box service: it runs for a job that
// names a proxy address, each connection on a proxy stream to the host.
type networkService struct{}

// Start listens on the job's proxy address, when it has one.
func (networkService) Start(ctx context.Context, host *Host, job *initproto.Job) (func(), error) {
	if job.Proxy == "" {
		return func() {}, nil
	}
	if len(job.CA) > 0 {
		if err := writeCABundle(initproto.CABundle, initproto.SystemCAs, job.CA); err != nil {
			return nil, fmt.Errorf("runbox's CA bundle: %w", err)
		}
	}
	// Connections still waiting for a stream give up when it stops.
	ctx, cancel := context.WithCancel(ctx)
	p, err := startProxy(job.Proxy, func() (stream, error) {
		return host.Open(ctx, initproto.StreamProxy, nil)
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("the network proxy: %w", err)
	}
	return func() { cancel(); p.stop() }, nil
}
