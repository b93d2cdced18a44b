package docker

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

func frame(stream byte, payload string) []byte {
	h := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

// relayAnswer finds the relay's first stdout byte past stderr frames and
// gives back, framed again, what followed it in its frame.
func TestRelayAnswer(t *testing.T) {
	in := bytes.Join([][]byte{frame(2, "warming up\n"), frame(1, "Rabc"), frame(1, "def")}, nil)
	r := bytes.NewReader(in)
	got, rest, err := relayAnswer(r)
	if err != nil || got != initproto.RelayReady {
		t.Fatalf("answer %q, %v", got, err)
	}
	after, _ := io.ReadAll(io.MultiReader(bytes.NewReader(rest), r))
	if want := append(frame(1, "abc"), frame(1, "def")...); !bytes.Equal(after, want) {
		t.Fatalf("after the answer %q, want %q", after, want)
	}
	// A lone answer leaves nothing to frame again.
	if got, rest, err := relayAnswer(bytes.NewReader(frame(1, "B"))); err != nil || got != initproto.RelayBusy || rest != nil {
		t.Fatalf("busy: %q %q %v", got, rest, err)
	}
	// A relay that failed says so on stderr, then its stream ends.
	if _, _, err := relayAnswer(bytes.NewReader(frame(2, "runbox-init relay: dial unix @runbox-init/channel: connect: connection refused\n"))); err == nil || !bytes.Contains([]byte(err.Error()), []byte("connection refused")) {
		t.Fatalf("a failed relay: %v", err)
	}
	// A runaway frame is not read.
	h := frame(2, "")
	binary.BigEndian.PutUint32(h[4:], 1<<30)
	if _, _, err := relayAnswer(bytes.NewReader(h)); err == nil {
		t.Fatal("a 1 GiB frame was accepted")
	}
}
