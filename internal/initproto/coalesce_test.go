package initproto

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/hashicorp/yamux"
)

// writes records each write it is given.
type writes struct {
	bytes.Buffer
	calls [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, bytes.Clone(p))
	return w.Buffer.Write(p)
}
func (w *writes) Close() error { return nil }

// A data frame goes out in one write; other frames, and whatever is not a
// frame header, go as they come; the bytes are the same.
func TestCoalesceDataFrames(t *testing.T) {
	w := &writes{}
	c := Coalesce(w)
	data := []byte{0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 5}
	window := []byte{0, 1, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0}
	empty := []byte{0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 0} // a FIN: no body
	for _, p := range [][]byte{data, []byte("hello"), window, empty, data, []byte("again"), []byte("not a frame")} {
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	want := [][]byte{append(bytes.Clone(data), "hello"...), window, empty, append(bytes.Clone(data), "again"...), []byte("not a frame")}
	if len(w.calls) != len(want) {
		t.Fatalf("%d writes, want %d: %q", len(w.calls), len(want), w.calls)
	}
	for i := range want {
		if !bytes.Equal(w.calls[i], want[i]) {
			t.Errorf("write %d: %q, want %q", i, w.calls[i], want[i])
		}
	}
}

// Through a real multiplexer pair, what one side writes arrives whole.
func TestCoalesceUnderYamux(t *testing.T) {
	a, b := net.Pipe()
	client, err := yamux.Client(Coalesce(a), MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	server, err := yamux.Server(Coalesce(b), MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB, past the windows
	go func() {
		st, err := client.OpenStream()
		if err != nil {
			return
		}
		_, _ = st.Write(payload)
		_ = st.Close()
	}()
	st, err := server.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(st)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
}
