package sandbox

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// FuzzChannel feeds the server's side of a box's channel whatever a hostile
// box might write: it must end, bounded, with a report it can stand behind
// or none, never panic or hang.
func FuzzChannel(f *testing.F) {
	// A well-formed exchange, as a box would send it, as a seed.
	rec := &recorded{}
	host, box := net.Pipe()
	boxDone := make(chan struct{})
	go func() {
		defer close(boxDone)
		sess, _ := yamux.Server(recorder{box, rec}, initproto.MuxConfig())
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var h initproto.Header
		_, _ = initproto.Receive(st, &h, 1<<20)
		_ = initproto.SendReport(st, &initproto.Report{Stdout: []byte("1\n"), Artifacts: []initproto.Artifact{{Path: "a", Size: 1, Sent: true}}})
		_ = st.Close()
		as, _ := sess.OpenStream()
		_ = initproto.Send(as, initproto.Header{Kind: initproto.StreamArtifact}, []byte("x"))
		_ = as.Close()
		<-sess.CloseChan()
	}()
	l := manifest.Default().Limits
	runOnce(fakeConn{host}, l, time.Second)
	host.Close()
	<-boxDone
	f.Add(rec.bytes())
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		host, box := net.Pipe()
		go func() {
			// Read what the server sends, so its writes never block.
			go func() {
				buf := make([]byte, 4096)
				for {
					if _, err := box.Read(buf); err != nil {
						return
					}
				}
			}()
			_, _ = box.Write(data)
			_ = box.Close()
		}()
		l.OutputBytes, l.ArtifactBytes = 1<<16, 1<<16
		done := make(chan collected, 1)
		go func() {
			done <- runOnce(fakeConn{host}, l, 200*time.Millisecond)
		}()
		select {
		case c := <-done:
			if c.report != nil {
				var n int
				for _, b := range c.contents {
					n += len(b)
				}
				if int64(n) > int64(l.ArtifactBytes) || int64(len(c.report.Stdout)+len(c.report.Stderr)) > maxReport(l) {
					t.Fatalf("accepted %d bytes of artifacts, %d of output", n, len(c.report.Stdout)+len(c.report.Stderr))
				}
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the channel did not end")
		}
		host.Close()
	})
}

// runOnce is a one-off run's call over conn, as the runner makes it.
func runOnce(conn Conn, l manifest.Limits, wait time.Duration) collected {
	ch, err := newChannel(conn, conn, maxStream(l))
	if err != nil {
		return collected{err: err}
	}
	defer ch.close()
	b := ch.begin(context.Background(), l, nil, false)
	defer ch.finish(b)
	return ch.run(b, &initproto.Job{}, wait, false)
}

// recorder keeps what a box writes.
type recorder struct {
	net.Conn
	w *recorded
}

func (r recorder) Write(p []byte) (int, error) {
	r.w.mu.Lock()
	r.w.b.Write(p)
	r.w.mu.Unlock()
	return r.Conn.Write(p)
}

// recorded is what a recorder kept; the multiplexer's goroutines write it.
type recorded struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (r *recorded) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.b.Bytes())
}
