//go:build linux

package boxinit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Node's fetch keeps an idle tunnel through the proxy for its next
// request to the origin. runbox-init's proxy closes a call's tunnels once
// the call is over, so a session's next cell must not take one up: before
// its loop has seen the close, it could, and its request died with EPIPE.
// A cell ends its tunnels where it ends, as the process's exit would.
func TestNodeSessionCellEndsItsProxyTunnels(t *testing.T) {
	env := []string{"NODE_OPTIONS=" + initproto.NodeProxyOptions()}
	for k, v := range initproto.ProxyEnv(tunnelProxy(t)) {
		env = append(env, k+"="+v)
	}
	_, run := newTestSession(t, "node", "node", env...)
	for i, want := range []string{"1\n", "2\n"} {
		if rep := run("console.log(await (await fetch('http://origin.test/')).text())\n", cellTimeout); rep.ExitCode != 0 || string(rep.Stdout) != want {
			t.Fatalf("cell %d: exit %d, tunnel %q (want %q), stderr %q", i+1, rep.ExitCode, rep.Stdout, want, rep.Stderr)
		}
	}
}

// tunnelProxy is a CONNECT proxy that is its own origin: each tunnel
// answers every request on it with the tunnel's number, and stays open.
// It returns the proxy's address.
func tunnelProxy(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveTunnel(c, n)
			}()
		}
	}()
	return ln.Addr().String()
}

func serveTunnel(c net.Conn, n int) {
	defer c.Close()
	br := bufio.NewReader(c)
	if req, err := http.ReadRequest(br); err != nil || req.Method != http.MethodConnect {
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	body := fmt.Sprint(n)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
	}
}
