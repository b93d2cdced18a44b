//go:build linux

package boxinit

import (
	"fmt"
	"io"
	"sync"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// A peek (initproto.StreamPeek) shows the server what the running job's
// program has written so far: its captures are read, never drained, so
// the report at the end is the same with or without peeks.

// liveOutput is where the running program's captures are found by a
// peek: set when a program starts, and, in a session, cleared at the
// cell's end (the next cell's output is not the last one's).
type liveOutput struct {
	mu             sync.Mutex
	stdout, stderr *capture
}

// set makes out and errs the captures a peek reads; nil is nothing
// running. A nil l is a job nobody peeks at.
func (l *liveOutput) set(out, errs *capture) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.stdout, l.stderr = out, errs
	l.mu.Unlock()
}

// peek is the output so far, each stream within max bytes.
func (l *liveOutput) peek(max int) *initproto.Peek {
	l.mu.Lock()
	out, errs := l.stdout, l.stderr
	l.mu.Unlock()
	p := &initproto.Peek{Stdout: []byte{}, Stderr: []byte{}}
	if out == nil || errs == nil {
		return p
	}
	p.Running = true
	// Both streams as they are at one moment: each capture's writer
	// holds only its own lock, so taking both (always stdout's first)
	// waits for neither stream's next write.
	out.mu.Lock()
	if errs != out {
		errs.mu.Lock()
		defer errs.mu.Unlock()
	}
	defer out.mu.Unlock()
	p.Stdout, p.StdoutTruncated, p.StdoutBytes = out.snapshot(max)
	p.Stderr, p.StderrTruncated, p.StderrBytes = errs.snapshot(max)
	return p
}

// snapshot is what c holds now, cut to at most max bytes (its first and
// last bytes, with a marker where any were dropped), and the bytes
// written so far: its head, tail and count taken together, copied, so c
// goes on as if never read. The caller holds c.mu.
func (c *capture) snapshot(max int) (out []byte, truncated bool, total int64) {
	// What c keeps, in order: its head, then its tail (a ring once full).
	parts := [][]byte{c.head, c.tail}
	if c.full {
		parts = [][]byte{c.head, c.tail[c.next:], c.tail[:c.next]}
	}
	kept := 0
	for _, p := range parts {
		kept += len(p)
	}
	first, last := len(c.head), kept-len(c.head)
	if kept > max {
		first = max / 2
		last = max - first
	}
	out = make([]byte, 0, first+last+len(initproto.TruncationMarker)+20)
	out = appendRange(out, parts, 0, first)
	dropped := c.total - int64(first) - int64(last)
	if dropped > 0 {
		out = append(out, fmt.Sprintf(initproto.TruncationMarker, dropped)...)
	}
	out = appendRange(out, parts, kept-last, kept)
	return out, dropped > 0, c.total
}

// appendRange appends bytes [from, to) of the parts taken as one.
func appendRange(out []byte, parts [][]byte, from, to int) []byte {
	at := 0
	for _, p := range parts {
		lo, hi := max(from-at, 0), min(to-at, len(p))
		if lo < hi {
			out = append(out, p[lo:hi]...)
		}
		at += len(p)
	}
	return out
}

// servePeek answers a peek stream whose request h was read: the output
// so far within the bound h asks.
func servePeek(w io.Writer, h initproto.Header, live *liveOutput) {
	_ = initproto.SendPeek(w, live.peek(initproto.PeekBound(h)))
}
