package initproto

import (
	"encoding/binary"
	"io"
)

// Coalesce returns conn with a writer that sends each of the multiplexer's
// data frames in one write: yamux writes a frame's 12-byte header and its
// body in two calls, and on the box's attach stream each write travels
// alone through the engine's copies (the client's connection, the engine,
// its shim, the box's stdin), so a header on its own costs a whole trip.
// Only one goroutine may write (yamux's send loop is the only writer).
func Coalesce(conn io.ReadWriteCloser) io.ReadWriteCloser {
	return &coalescing{ReadWriteCloser: conn}
}

type coalescing struct {
	io.ReadWriteCloser
	held bool
	buf  []byte
}

// yamux's frame header: version, type, flags (2), stream id (4), length (4);
// a data frame (type 0) of non-zero length is followed by its body.
const (
	frameHeaderSize = 12
	frameTypeData   = 0
)

func (c *coalescing) Write(p []byte) (int, error) {
	if c.held {
		c.held = false
		c.buf = append(c.buf[:frameHeaderSize], p...)
		if _, err := c.ReadWriteCloser.Write(c.buf); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if len(p) == frameHeaderSize && p[1] == frameTypeData && binary.BigEndian.Uint32(p[8:]) > 0 {
		c.buf = append(c.buf[:0], p...)
		c.held = true
		return len(p), nil
	}
	return c.ReadWriteCloser.Write(p)
}
