//go:build linux

package boxinit

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
)

// cellOut routes one stream of a session's interpreter to the running
// cell's capture, up to the cell's end marker (a nonce the driver writes
// once the cell is done); on stderr a status and "\x1e" follow it. Output
// between cells belongs to no call and is dropped.
type cellOut struct {
	mu         sync.Mutex
	target     io.Writer
	marker     []byte
	withStatus bool
	pend       []byte // a possible start of the marker, held back
	phase      int    // 0: the cell's output, 1: the status, 2: ended
	statusBuf  []byte
	seen       chan struct{}
}

// begin starts a cell: output goes to target until marker.
func (c *cellOut) begin(target io.Writer, marker []byte, withStatus bool) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target, c.marker, c.withStatus = target, marker, withStatus
	c.pend, c.phase, c.statusBuf = nil, 0, nil
	c.seen = make(chan struct{})
	return c.seen
}

// end closes the cell: what was held back is the cell's after all.
func (c *cellOut) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase == 0 && c.target != nil {
		_, _ = c.target.Write(c.pend)
	}
	c.target, c.marker, c.pend = nil, nil, nil
}

// status is what the driver said of the ended cell: its exit status, and
// whether the syntax check refused it ("c").
func (c *cellOut) status() (exit int, checkFailed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := string(c.statusBuf)
	s, checkFailed = strings.CutSuffix(s, "c")
	exit, err := strconv.Atoi(s)
	if err != nil {
		exit = 1
	}
	return exit, checkFailed
}

func (c *cellOut) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if c.target == nil {
		return n, nil
	}
	if c.phase == 0 {
		buf := append(append([]byte(nil), c.pend...), p...)
		i := bytes.Index(buf, c.marker)
		if i < 0 {
			keep := markerStart(buf, c.marker)
			_, _ = c.target.Write(buf[:len(buf)-keep])
			c.pend = buf[len(buf)-keep:]
			return n, nil
		}
		_, _ = c.target.Write(buf[:i])
		c.pend = nil
		p = buf[i+len(c.marker):]
		if !c.withStatus {
			c.phase = 2
			close(c.seen)
			return n, nil
		}
		c.phase = 1
	}
	if c.phase == 1 {
		if i := bytes.IndexByte(p, 0x1e); i >= 0 {
			c.statusBuf = append(c.statusBuf, p[:i]...)
			c.phase = 2
			close(c.seen)
		} else if len(c.statusBuf) < 16 {
			c.statusBuf = append(c.statusBuf, p[:min(len(p), 16)]...)
		}
	}
	return n, nil
}

// markerStart is how many of buf's last bytes may begin a marker that the
// next write completes: they are held back, and the rest goes to the cell
// at once (a peek sees the cell's last line before the cell writes more).
func markerStart(buf, marker []byte) int {
	for k := min(len(buf), len(marker)-1); k > 0; k-- {
		if bytes.HasPrefix(marker, buf[len(buf)-k:]) {
			return k
		}
	}
	return 0
}
