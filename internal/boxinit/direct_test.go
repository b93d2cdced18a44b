//go:build linux

package boxinit

import (
	"bufio"
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
// a non-root peer is refused, and a newer channel's connection ends the
// one before.
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
	older2 := sess
	sess, _ = relayChannel(t, newer, 3)
	select {
	case <-older2.CloseChan():
	case <-time.After(30 * time.Second):
		t.Fatal("the older connection did not end")
	}
	if rep, _, err := collectRun(t, sess, initproto.Header{}, job("echo $X", "r_3")); err != nil || string(rep.Stdout) != "kept\n" || rep.Session.Calls != 3 {
		t.Fatalf("the cell over the newer connection: %+v %v", rep, err)
	}
	// Stdin's channel still opens: a server without the socket's way in.
	again := b.connect(4, false)
	if rep, _, err := collectRun(t, again, initproto.Header{}, job("echo $X", "r_4")); err != nil || string(rep.Stdout) != "kept\n" {
		t.Fatalf("the cell over stdin again: %+v %v", rep, err)
	}
}

// TestSessionLane: a channel on the direct socket offers a cell lane; a
// connection with its token runs cells, their artifacts coming on the
// channel; a token is taken once, a wrong one gets no answer, and the lane
// ends with its channel.
func TestSessionLane(t *testing.T) {
	s, _ := newTestSession(t, "bash", "bash")
	name := fmt.Sprintf("@runbox-test-lane-%d", os.Getpid())
	dl, err := listenDirect(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dl.l.Close() })
	_, job := serveTestSession(t, s, nil, dl)
	dial := func() net.Conn {
		c, err := net.Dial("unix", name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	sess, _ := relayChannel(t, dial(), 1)
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := initproto.Send(st, initproto.Header{Kind: initproto.StreamLane}); err != nil {
		t.Fatal(err)
	}
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, initproto.LaneTokenSize)
	if err != nil || h.Kind != initproto.StreamLane || len(blobs) != 1 || len(blobs[0]) != initproto.LaneTokenSize {
		t.Fatalf("the lane's offer: %+v %d blobs, %v", h, len(blobs), err)
	}
	token := blobs[0]

	wrong := dial()
	if _, err := wrong.Write(initproto.LaneHello(make([]byte, initproto.LaneTokenSize))); err != nil {
		t.Fatal(err)
	}
	if err := initproto.AwaitLaneAck(wrong, token); err == nil {
		t.Fatal("a lane with a token never offered was answered")
	}

	l := dial()
	if _, err := l.Write(initproto.LaneHello(token)); err != nil {
		t.Fatal(err)
	}
	if err := initproto.AwaitLaneAck(l, token); err != nil {
		t.Fatalf("the lane was not taken: %v", err)
	}
	again := dial()
	if _, err := again.Write(initproto.LaneHello(token)); err != nil {
		t.Fatal(err)
	}
	if err := initproto.AwaitLaneAck(again, token); err == nil {
		t.Fatal("a token was taken twice")
	}

	lr := bufio.NewReaderSize(l, 64<<10)
	for i, code := range []string{"X=lane; echo one", "echo $X > out.txt; echo two"} {
		if err := initproto.SendCell(l, job(code, fmt.Sprintf("r_%d", i))); err != nil {
			t.Fatal(err)
		}
		rep, err := initproto.ReceiveReport(lr, 1<<20)
		if err != nil || rep.ExitCode != 0 || rep.Session == nil || rep.Session.Calls != i+1 {
			t.Fatalf("cell %d on the lane: %+v %v", i, rep, err)
		}
		if want := []string{"one\n", "two\n"}[i]; string(rep.Stdout) != want {
			t.Fatalf("cell %d printed %q, want %q", i, rep.Stdout, want)
		}
		if i == 1 {
			if len(rep.Artifacts) != 1 || !rep.Artifacts[0].Sent {
				t.Fatalf("the artifacts the report names: %+v", rep.Artifacts)
			}
			ast, err := sess.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			var ah initproto.Header
			data, err := initproto.Receive(ast, &ah, 1<<20)
			if err != nil || ah.Kind != initproto.StreamArtifact || len(data) != 1 || string(data[0]) != "lane\n" {
				t.Fatalf("the artifact on the channel: %+v %q %v", ah, data, err)
			}
		}
	}

	_ = sess.Close()
	if n, err := l.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the lane outlived its channel: %d bytes, %v", n, err)
	}
}
