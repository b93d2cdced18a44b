//go:build linux

package boxinit

import (
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// exposeDialTimeout bounds the connection to the box's own server.
const exposeDialTimeout = 5 * time.Second

// serveExpose carries one connection the server opened into the box
// (initproto.StreamExpose): it connects to 127.0.0.1 at the header's port,
// says whether that worked, and then copies bytes both ways until both
// sides are done or the channel ends. Nothing is listened on here: the
// connection is the server's to open.
func serveExpose(st *yamux.Stream, h initproto.Header) {
	port, err := initproto.ExposePort(h)
	var c net.Conn
	if err == nil {
		c, err = net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exposeDialTimeout)
	}
	if err != nil {
		_ = initproto.WriteExposeAnswer(st, err)
		return
	}
	defer c.Close()
	if initproto.WriteExposeAnswer(st, nil) != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The person's side ended its requests: the box's server reads
		// its end, and may still answer.
		_, _ = io.Copy(c, st)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(st, c)
	// The box's server is done: the stream's end tells the server, and
	// whatever the person still sends is dropped.
	_ = st.Close()
	_ = c.Close()
	wg.Wait()
}
