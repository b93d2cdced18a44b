package initproto

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A box outlives the server that opened its channel: a restarted server
// attaches again, mid-way through whatever the dead one was writing. So the
// server-to-box direction is framed, and every channel starts with a reset
// that ends any frame the dead server left half-written:
//
//	frame: 0xA5, length (2 bytes, big endian), data
//	reset: resetPadding zero bytes, 0x5A, "RBXRESET", a 16-byte nonce
//	end:   0x5A, "RBXENDED"
//
// A zero byte between frames is padding, so the padding completes any
// half-written frame and is then skipped one byte at a time: no alignment
// can hide the marker. A box's first channel needs no padding, as nothing
// was written to it before ([ResetWriter.Start]). The box answers a reset
// with "RBXACK01" and the nonce on its stdout, then a new multiplexer
// session; the server skips everything before that answer (the dead
// server's half-read output), and need not wait for it before it writes
// its own session's first bytes. End says the server has what it needed
// of a one-off box (its report and artifacts): the box may exit; a channel
// that breaks without it is a server gone, and the box keeps its run's
// report for the next one ([StreamCollect]).
const (
	frameByte    = 0xA5
	resetByte    = 0x5A
	maxFrame     = 1<<16 - 1
	resetPadding = maxFrame + 4
	// NonceSize is the size of a reset's nonce.
	NonceSize = 16
)

var (
	resetMagic = []byte("RBXRESET")
	endMagic   = []byte("RBXENDED")
	ackMagic   = []byte("RBXACK01")
)

// ResetWriter frames the server's writes to a session box.
type ResetWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewResetWriter frames writes to w.
func NewResetWriter(w io.Writer) *ResetWriter { return &ResetWriter{w: w} }

// Reset ends whatever a previous server left half-written and starts a
// channel named by nonce.
func (rw *ResetWriter) Reset(nonce []byte) error { return rw.reset(nonce, resetPadding) }

// Start starts the first channel of a box nobody wrote to before: a reset
// without its padding.
func (rw *ResetWriter) Start(nonce []byte) error { return rw.reset(nonce, 0) }

// End tells a one-off box that the server has its report and artifacts:
// it may exit.
func (rw *ResetWriter) End() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	_, err := rw.w.Write(append([]byte{resetByte}, endMagic...))
	return err
}

func (rw *ResetWriter) reset(nonce []byte, padding int) error {
	if len(nonce) != NonceSize {
		return fmt.Errorf("initproto: a nonce of %d bytes, not %d", len(nonce), NonceSize)
	}
	msg := make([]byte, padding, padding+1+len(resetMagic)+NonceSize)
	msg = append(msg, resetByte)
	msg = append(msg, resetMagic...)
	msg = append(msg, nonce...)
	rw.mu.Lock()
	defer rw.mu.Unlock()
	_, err := rw.w.Write(msg)
	return err
}

// Write sends p as frames.
func (rw *ResetWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	n := 0
	for len(p) > 0 {
		k := min(len(p), maxFrame)
		buf := make([]byte, 3+k)
		buf[0], buf[1], buf[2] = frameByte, byte(k>>8), byte(k)
		copy(buf[3:], p[:k])
		if _, err := rw.w.Write(buf); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

// ResetReader is the box's side: Read returns the data of the current
// channel and io.EOF when a reset ends it; Await waits for the next reset.
type ResetReader struct {
	br        *bufio.Reader
	remaining int
	// nonce is the last reset's, not yet taken by Await.
	nonce []byte
	// ended: the server ended the channel (End), not yet taken by Await.
	ended bool
}

// NewResetReader parses the framed stream r.
func NewResetReader(r io.Reader) *ResetReader {
	return &ResetReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Read returns the current channel's data; io.EOF once a reset or an end
// arrived (Await then returns its nonce, or ErrEnded, at once).
func (rr *ResetReader) Read(p []byte) (int, error) {
	if rr.nonce != nil || rr.ended {
		return 0, io.EOF
	}
	for rr.remaining == 0 {
		reset, err := rr.next()
		if err != nil {
			return 0, err
		}
		if reset {
			return 0, io.EOF
		}
	}
	n, err := rr.br.Read(p[:min(len(p), rr.remaining)])
	rr.remaining -= n
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// next reads one frame header, padding byte or reset; it sets remaining
// or nonce.
func (rr *ResetReader) next() (reset bool, err error) {
	b, err := rr.br.ReadByte()
	if err != nil {
		return false, err
	}
	switch b {
	case 0:
		return false, nil
	case frameByte:
		var l [2]byte
		if _, err := io.ReadFull(rr.br, l[:]); err != nil {
			return false, err
		}
		rr.remaining = int(l[0])<<8 | int(l[1])
		return false, nil
	case resetByte:
		var m [8 + NonceSize]byte
		if _, err := io.ReadFull(rr.br, m[:8]); err != nil {
			return false, err
		}
		if bytes.Equal(m[:8], endMagic) {
			rr.ended = true
			return true, nil
		}
		if !bytes.Equal(m[:8], resetMagic) {
			return false, nil // garbage: skipped
		}
		if _, err := io.ReadFull(rr.br, m[8:]); err != nil {
			return false, err
		}
		rr.nonce = append([]byte(nil), m[8:]...)
		return true, nil
	}
	return false, nil // garbage between frames: skipped
}

// ErrEnded is Await's answer to the server's End.
var ErrEnded = errors.New("initproto: the server ended the channel")

// Await discards data until a reset and returns its nonce, or ErrEnded
// when the server ended the channel first.
func (rr *ResetReader) Await() ([]byte, error) {
	for rr.nonce == nil {
		if rr.ended {
			rr.ended = false
			return nil, ErrEnded
		}
		if rr.remaining > 0 {
			if _, err := rr.br.Discard(rr.remaining); err != nil {
				return nil, err
			}
			rr.remaining = 0
			continue
		}
		if _, err := rr.next(); err != nil {
			return nil, err
		}
	}
	n := rr.nonce
	rr.nonce = nil
	return n, nil
}

// Ack is the box's answer to a reset, written before its new session.
func Ack(nonce []byte) []byte {
	return append(append([]byte(nil), ackMagic...), nonce...)
}

// ErrNoAck is a box that did not answer a reset within the bytes allowed.
var ErrNoAck = errors.New("initproto: the session box did not answer the reset")

// AwaitAck reads r until the box's answer to the reset named by nonce,
// at most limit bytes, and returns a reader of what follows it.
func AwaitAck(r io.Reader, nonce []byte, limit int) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	want := Ack(nonce)
	matched, seen := 0, 0
	for matched < len(want) {
		b, err := br.ReadByte()
		if err != nil {
			return nil, err
		}
		if seen++; seen > limit {
			return nil, ErrNoAck
		}
		switch {
		case b == want[matched]:
			matched++
		case b == want[0]:
			matched = 1
		default:
			matched = 0
		}
	}
	return br, nil
}
