//go:build linux

package boxinit

import (
	"fmt"
	"sync"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// capture keeps the first and last bytes of a stream up to a limit and
// counts the rest, so a flood is drained without growing memory.
type capture struct {
	mu    sync.Mutex
	head  []byte
	tail  []byte // ring buffer once full
	next  int    // ring write position
	full  bool
	total int64
	hcap  int
	tcap  int
	// pend, marks and peer follow the display marks in the stream
	// (displays.go): peer is the other stream, whose size a mark notes.
	pend  []byte
	marks []displayMark
	peer  *capture
}

// newCapture keeps up to limit bytes. Its buffers grow with the output:
// most calls write a few bytes, and two 64 KiB buffers made and zeroed up
// front were most of a session cell's allocation in runbox-init.
func newCapture(limit int) *capture {
	if limit < 2 {
		limit = 2
	}
	h := limit / 2
	return &capture{hcap: h, tcap: limit - h}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.write(c.stripMarks(p))
	return n, nil
}

func (c *capture) write(p []byte) {
	c.total += int64(len(p))
	if room := c.hcap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return
	}
	if len(p) >= c.tcap {
		c.tail = append(c.tail[:0], p[len(p)-c.tcap:]...)
		c.next, c.full = 0, true
		return
	}
	for len(p) > 0 {
		if !c.full {
			k := min(c.tcap-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			if len(c.tail) == c.tcap {
				c.full, c.next = true, 0
			}
			continue
		}
		k := copy(c.tail[c.next:], p)
		p = p[k:]
		c.next = (c.next + k) % c.tcap
	}
}

// bytes returns the kept output, with a marker where bytes were dropped.
func (c *capture) bytes() (out []byte, truncated bool, total int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pend := c.pend
	c.pend = nil
	c.write(pend)
	out = append([]byte(nil), c.head...)
	tail := c.tail
	if c.full {
		tail = append(append([]byte(nil), c.tail[c.next:]...), c.tail[:c.next]...)
	}
	dropped := c.total - int64(len(c.head)) - int64(len(tail))
	if dropped > 0 {
		out = append(out, fmt.Sprintf(initproto.TruncationMarker, dropped)...)
	}
	return append(out, tail...), dropped > 0, c.total
}
