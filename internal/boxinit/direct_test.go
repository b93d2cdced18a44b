//go:build linux

package boxinit

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// TestSessionDirectBesideStdin: a session box's direct socket serves
// channels while stdin's is open, with the state the cells before left;
// a non-root peer is refused, and a newer connection ends the one before.
func TestSessionDirectBesideStdin(t *testing.T) {
	s, _ := newTestSession(t, "bash", "bash")
	name := fmt.Sprintf("@runbox-test-direct-%d", os.Getpid())
	dl, err := listenDirect(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dl.l.Close() })
	var notRoot atomic.Bool
	dl.root = func(c net.Conn) bool { return fromRoot(c) && !notRoot.Load() }
	b, job := serveTestSession(t, s, nil, dl)
	first := b.connect(1, false)
	if rep, _, err := collectRun(t, first, initproto.Header{}, job("X=kept", "r_1")); err != nil || rep.ExitCode != 0 {
		t.Fatalf("the cell over stdin: %+v %v", rep, err)
	}

	dial := func() net.Conn {
		c, err := net.Dial("unix", name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	notRoot.Store(true)
	refused := dial()
	_ = refused.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := refused.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a non-root peer was not refused: %d bytes, %v", n, err)
	}
	notRoot.Store(false)

	older := dial()
	sess, _ := relayChannel(t, older, 2)
	if rep, _, err := collectRun(t, sess, initproto.Header{}, job("echo $X", "r_2")); err != nil || string(rep.Stdout) != "kept\n" || rep.Session.Calls != 2 {
		t.Fatalf("the cell over the direct socket: %+v %v", rep, err)
	}
	newer := dial()
	select {
	case <-sess.CloseChan():
	case <-time.After(30 * time.Second):
		t.Fatal("the older connection did not end")
	}
	sess, _ = relayChannel(t, newer, 3)
	if rep, _, err := collectRun(t, sess, initproto.Header{}, job("echo $X", "r_3")); err != nil || string(rep.Stdout) != "kept\n" || rep.Session.Calls != 3 {
		t.Fatalf("the cell over the newer connection: %+v %v", rep, err)
	}
	// Stdin's channel still opens: a server without the socket's way in.
	again := b.connect(4, false)
	if rep, _, err := collectRun(t, again, initproto.Header{}, job("echo $X", "r_4")); err != nil || string(rep.Stdout) != "kept\n" {
		t.Fatalf("the cell over stdin again: %+v %v", rep, err)
	}
}
