package sandbox

import (
	"crypto/rand"
	"io"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// firstChannel starts a fresh one-off box's channel: a reset without
// padding (nothing was written to the box before), the multiplexer's bytes
// right behind it; the box's answer is awaited by the first read, so the
// call waits for no round trip.
func firstChannel(conn Conn, max int64) (*channel, error) {
	nonce := make([]byte, initproto.NonceSize)
	_, _ = rand.Read(nonce)
	w := initproto.NewResetWriter(conn)
	if err := w.Start(nonce); err != nil {
		return nil, err
	}
	ch, err := newChannel(conn, sessionConn{Reader: &ackReader{r: conn, nonce: nonce, limit: 1 << 20}, w: w, c: conn}, max)
	if err != nil {
		return nil, err
	}
	ch.end = w.End
	return ch, nil
}

// ackReader reads, on its first read, up to the box's answer to the reset
// named by nonce, then what follows it.
type ackReader struct {
	r     io.Reader
	nonce []byte
	limit int
	after io.Reader
}

func (a *ackReader) Read(p []byte) (int, error) {
	if a.after == nil {
		rd, err := initproto.AwaitAck(a.r, a.nonce, a.limit)
		if err != nil {
			return 0, err
		}
		a.after = rd
	}
	return a.after.Read(p)
}
