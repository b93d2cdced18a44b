package initproto

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// A job runs for as long as its deadline allows: the stream the server
// half-closes after sending it must still carry the report however long
// that takes, not be cut by the multiplexer's own close timer.
func TestHalfClosedStreamWaitsForTheAnswer(t *testing.T) {
	host, box := net.Pipe()
	hs, err := yamux.Client(host, MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	bs, err := yamux.Server(box, MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()

	// Longer than every other timer of the configuration (a close timer
	// of WriteTimeout cut such runs before).
	runs := WriteTimeout + 300*time.Millisecond
	go func() {
		st, err := bs.AcceptStream()
		if err != nil {
			return
		}
		job, _ := io.ReadAll(st)
		time.Sleep(runs)
		_, _ = st.Write(append([]byte("report for "), job...))
		_ = st.Close()
	}()

	st, err := hs.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("job")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(st)
	if err != nil || string(got) != "report for job" {
		t.Fatalf("after a %s run: %q, %v", runs, got, err)
	}
}
