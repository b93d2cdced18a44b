package initproto

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
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

func TestReceiveWith(t *testing.T) {
	var buf bytes.Buffer
	_ = Send(&buf, Header{Kind: "big"}, make([]byte, 100))
	_ = Send(&buf, Header{Kind: "next"})
	buf.WriteString("raw after")
	br := bufio.NewReaderSize(&buf, 64<<10)
	var h Header
	limit := func() int64 {
		if h.Kind == "big" {
			return 100
		}
		return 10
	}
	if blobs, err := ReceiveWith(br, &h, limit); err != nil || len(blobs[0]) != 100 {
		t.Fatalf("first: %v", err)
	}
	// What followed the first message is still in the reader.
	if _, err := ReceiveWith(br, &h, limit); err != nil || h.Kind != "next" {
		t.Fatalf("second: %q %v", h.Kind, err)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "raw after" {
		t.Fatalf("rest %q", rest)
	}
	buf.Reset()
	_ = Send(&buf, Header{Kind: "small"}, make([]byte, 11))
	if _, err := ReceiveWith(&buf, &h, limit); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("past the kind's bound: %v", err)
	}
}

// Send writes a message that fits in 64 KiB in one write, and a larger one
// buffered; either reads back whole, message after message.
func TestSendSmallAndLarge(t *testing.T) {
	var buf bytes.Buffer
	writes := 0
	w := writerFunc(func(p []byte) (int, error) { writes++; return buf.Write(p) })
	big := bytes.Repeat([]byte("x"), 100<<10)
	jobs := []*Job{{Code: []byte("print(1)"), RunID: "r1"}, {Code: big, Stdin: []byte("in"), RunID: "r2"}}
	if err := SendJob(w, jobs[0]); err != nil || writes != 1 {
		t.Fatalf("a small job: %v, %d writes", err, writes)
	}
	if err := SendJob(w, jobs[1]); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(&buf, 64<<10)
	for _, want := range jobs {
		var h Header
		blobs, err := Receive(br, &h, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if h.Kind != StreamJob || h.Job == nil || JobBlobs(h.Job, blobs) != nil {
			t.Fatalf("got %+v", h)
		}
		if h.Job.RunID != want.RunID || !bytes.Equal(h.Job.Code, want.Code) || !bytes.Equal(h.Job.Stdin, want.Stdin) {
			t.Fatalf("job %s came back as %s with %d bytes of code", want.RunID, h.Job.RunID, len(h.Job.Code))
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A line longer than the reader's buffer, a small blob and one past
// smallBlob read back whole, message after message; a blob cut short is
// io.ErrUnexpectedEOF whatever its size.
func TestReceiveLongLinesAndBlobs(t *testing.T) {
	var buf bytes.Buffer
	long := &Job{Env: []string{strings.Repeat("A", 100<<10)}, RunID: "long"}
	big := bytes.Repeat([]byte("y"), smallBlob+1)
	_ = SendJob(&buf, long)
	_ = SendJob(&buf, &Job{Code: []byte("small"), Stdin: big, RunID: "next"})
	br := bufio.NewReaderSize(&buf, 64<<10)
	for _, want := range []string{"long", "next"} {
		var h Header
		blobs, err := Receive(br, &h, 1<<20)
		if err != nil || h.Job == nil || h.Job.RunID != want || JobBlobs(h.Job, blobs) != nil {
			t.Fatalf("%s: %+v, %v", want, h, err)
		}
		if want == "long" && h.Job.Env[0] != long.Env[0] || want == "next" && !bytes.Equal(h.Job.Stdin, big) {
			t.Fatalf("%s came back changed", want)
		}
	}
	for _, n := range []int{5, smallBlob + 1} {
		buf.Reset()
		_ = Send(&buf, Header{Kind: "cut"}, make([]byte, n))
		msg := buf.Bytes()[:buf.Len()-1]
		var h Header
		if _, err := Receive(bytes.NewReader(msg), &h, 1<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("a blob of %d bytes cut short: %v", n, err)
		}
	}
}
