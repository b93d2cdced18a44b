package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// channel is the server's side of a box's channel: one stream multiplexer
// session over the box's attached stdin and stdout (internal/initproto).
// A one-off box's channel carries one call; a session box's outlives the
// calls made over it. Either way the streams the box opens go through one
// accept loop to the running call's boxStreams (channel_streams.go): its
// artifacts to its collector, its tool calls and proxied connections to its
// handlers, under its bounds. A stream opened while no call runs (a
// process a cell left behind, or a call's straggler) is refused: never
// served with another call's handlers.
//
// Everything it reads is bounded: each call's bytes on the whole channel,
// the report, each artifact, the streams the box may open, and the time
// artifacts may take once the report is in.
type channel struct {
	conn Conn
	// counted fails the channel once the box sent more than the running
	// call may (begin sets its bound).
	counted *countingConn
	mux     *yamux.Session
	// done is closed when the accept loop ends (the channel is gone).
	done chan struct{}

	mu sync.Mutex
	// call serves the running call's streams; nil between calls.
	call *boxStreams
	// refused counts the streams refused since the last call began.
	refused int

	// end tells a one-off box the server has what it needed (its report
	// and artifacts): it may exit. nil for a session's channel.
	end func() error

	// cells is a session box's cells stream (initproto.StreamCells),
	// opened by its first call and read through cellsR; noCells says the
	// box knows no such stream. Only the running call uses them.
	cells   *yamux.Stream
	cellsR  *bufio.Reader
	noCells bool
	// lane carries a session's cells when its box is reached on its
	// direct socket (channel_lane.go); noLane says it has none.
	// close may come from another goroutine than the call's.
	lane   atomic.Pointer[lane]
	noLane bool
}

// collected is what came over the channel for one call.
type collected struct {
	report   *initproto.Report
	contents [][]byte
	// violation says how the box broke the protocol (flooded, lied):
	// its report is not believed and it is killed.
	violation string
	err       error
	// unsent is a report whose artifacts did not all come: not the
	// call's, but what it says of a session's state holds.
	unsent *initproto.Report
}

// newChannel is the channel over rw, which reads and writes conn's bytes
// (conn itself, or a session's reset framing over it); the box may send
// max bytes before the first call begins.
func newChannel(conn Conn, rw io.ReadWriteCloser, max int64) (*channel, error) {
	counted := &countingConn{ReadWriteCloser: rw, max: max}
	mux, err := yamux.Client(initproto.Coalesce(counted), initproto.MuxConfig())
	if err != nil {
		return nil, err
	}
	c := &channel{conn: conn, counted: counted, mux: mux, done: make(chan struct{})}
	go c.accept()
	return c, nil
}

// maxStream bounds what is accepted from a box in one call: the report
// with its capped output plus the artifacts, and room for the
// multiplexer's framing.
func maxStream(l manifest.Limits) int64 {
	return 4*int64(l.OutputBytes) + 2*int64(l.ArtifactBytes) + 4<<20
}

// maxReport bounds a report's output: both streams, capped by runbox-init,
// and their truncation markers.
func maxReport(l manifest.Limits) int64 {
	return 2*int64(l.OutputBytes) + 64<<10
}

// maxIdleStreams bounds the streams a box may open between two calls
// before its channel is closed (the next call of a session opens a new
// one; the session's state, in the box, is kept).
const maxIdleStreams = initproto.MaxBoxStreams

// accept serves the streams the box opens until the channel ends.
func (c *channel) accept() {
	defer close(c.done)
	for {
		st, err := c.mux.AcceptStream()
		if err != nil {
			return
		}
		c.mu.Lock()
		call := c.call
		ok := true
		if call != nil {
			ok = call.admit(st)
		} else {
			c.refused++
			ok = c.refused <= maxIdleStreams
			refuse(st)
		}
		c.mu.Unlock()
		if !ok {
			_ = c.mux.Close()
			return
		}
	}
}

// begin makes a call's boxStreams the channel's: from now on the streams
// the box opens are the call's, served by streams with ctx under l's
// bounds, until finish. A session's call is named by a random Call that
// its box's streams carry, so one of an earlier call that arrives late is
// told apart; a one-off box's streams carry 0.
func (c *channel) begin(ctx context.Context, l manifest.Limits, streams *initproto.Streams, session bool) *boxStreams {
	b := newBoxStreams(ctx, l, streams)
	b.sess = c.mux
	if session {
		var n [8]byte
		_, _ = rand.Read(n[:])
		b.call = binary.BigEndian.Uint64(n[:]) | 1
	}
	c.counted.bound(maxStream(l) + b.maxBytes())
	c.mu.Lock()
	c.call, c.refused = b, 0
	c.mu.Unlock()
	return b
}

// finish ends b's turn: streams opened from now on are refused, b's
// handlers are cancelled and its streams released.
func (c *channel) finish(b *boxStreams) {
	c.mu.Lock()
	if c.call == b {
		c.call = nil
	}
	c.mu.Unlock()
	b.end()
}

// run sends the call's job and collects the report and the artifacts it
// names, within wait once the report is in. collect: the box already runs
// the job (a restarted server adopts it), so it is asked for the report
// of the job's run instead.
func (c *channel) run(b *boxStreams, job *initproto.Job, wait time.Duration, collect bool) (got collected) {
	defer func() {
		if got.err != nil && c.counted.over() {
			got.violation = fmt.Sprintf("it sent more than the %d bytes a run may", c.counted.limit())
		}
		if why := b.broken(); why != "" && got.violation == "" {
			got.violation = why
		}
	}()
	b.trace.Mark("host: call's streams set up")
	if b.call != 0 && !collect && !c.noLane && c.lane.Load() == nil {
		l := c.openLane()
		c.lane.Store(l)
		c.noLane = l == nil
	}
	if l := c.lane.Load(); b.call != 0 && !collect && l != nil {
		return c.runLane(l, b, job, wait)
	}
	if b.call != 0 && !collect && !c.noCells {
		if got, ok := c.runCell(b, job, wait); ok {
			return got
		}
	}
	st, err := c.mux.OpenStream()
	if err != nil {
		got.err = err
		return got
	}
	b.trace.Mark("host: job stream opened")
	b.openJob()
	// A box that dies before reading its job must not block the report.
	go func() {
		if collect {
			_ = initproto.Send(st, initproto.Header{Kind: initproto.StreamCollect, Run: job.RunID})
		} else {
			_ = initproto.SendJob(st, job)
		}
		_ = st.Close()
		b.trace.Mark("host: job sent")
	}()
	rep, err := initproto.ReceiveReport(st, maxReport(b.limits))
	return c.answer(b, rep, err, wait)
}

// runCell sends a session's job on the channel's cells stream, opening it
// for the channel's first call, and collects its outcome. ok is false when
// the box knows no cells stream (it closed the stream without an answer):
// the job did not run, and goes on a job stream of its own.
func (c *channel) runCell(b *boxStreams, job *initproto.Job, wait time.Duration) (got collected, ok bool) {
	first := c.cells == nil
	if first {
		st, err := c.mux.OpenStream()
		if err != nil {
			return collected{err: err}, true
		}
		c.cells, c.cellsR = st, bufio.NewReaderSize(st, 64<<10)
	}
	st := c.cells
	b.trace.Mark("host: cells stream ready")
	b.openJob()
	// A box that dies before reading its job must not block the report.
	go func() {
		if err := initproto.SendCell(st, job); err != nil {
			_ = st.Close()
		}
		b.trace.Mark("host: job sent")
	}()
	rep, err := initproto.ReceiveReport(c.cellsR, maxReport(b.limits))
	if err != nil {
		// The stream is spent either way: the next call opens another.
		_ = st.Close()
		c.cells, c.cellsR = nil, nil
		if first && errors.Is(err, io.EOF) && !c.closed() {
			c.noCells = true
			return collected{}, false
		}
	}
	return c.answer(b, rep, err, wait), true
}

// answer collects the artifacts rep names, once the report is in.
func (c *channel) answer(b *boxStreams, rep *initproto.Report, err error, wait time.Duration) (got collected) {
	b.trace.Mark("host: report received")
	if err != nil {
		got.err = fmt.Errorf("reading the report: %w", err)
		if errors.Is(err, initproto.ErrTooLarge) {
			got.violation = "a report larger than its output limit"
		}
		return got
	}
	got.report = rep
	want, violation := sentArtifacts(rep, b.limits)
	if violation != "" {
		got.violation = violation
		return got
	}
	if len(want) == 0 {
		return got
	}
	got.contents, got.violation, got.err = collectArtifacts(b.artsOf(), c.done, want, wait)
	if got.err != nil {
		// A report whose artifacts did not all come is not the run's.
		got.report, got.contents, got.unsent = nil, nil, rep
	}
	return got
}

// interrupt asks the box to interrupt the code a session's cell runs.
func (c *channel) interrupt() {
	if st, err := c.mux.OpenStream(); err == nil {
		_ = initproto.Send(st, initproto.Header{Kind: initproto.StreamInterrupt})
		_ = st.Close()
	}
}

// sentArtifacts are the artifacts a report names as sent, whose streams
// follow it; a report past the caps (or with a negative count) is a
// violation.
func sentArtifacts(rep *initproto.Report, l manifest.Limits) (want []initproto.Artifact, violation string) {
	var total int64
	for _, a := range rep.Artifacts {
		if a.Sent {
			want = append(want, a)
			total += a.Size
		}
	}
	if len(want) > l.Artifacts || total > int64(l.ArtifactBytes) || rep.ArtifactsOmitted < 0 {
		return nil, fmt.Sprintf("its report names %d artifacts of %d bytes, past the caps of %d and %s", len(want), total, l.Artifacts, l.ArtifactBytes)
	}
	return want, ""
}

// collectArtifacts takes one artifact stream's message from arts per
// artifact in want, within wait; lost closes when no more can come.
func collectArtifacts(arts <-chan artifactStream, lost <-chan struct{}, want []initproto.Artifact, wait time.Duration) (contents [][]byte, violation string, err error) {
	contents = make([][]byte, len(want))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for range want {
		var a artifactStream
		select {
		case a = <-arts:
		case <-timer.C:
			return nil, "", errors.New("waiting for artifacts: the box did not send them in time")
		case <-lost:
			return nil, "", errors.New("waiting for artifacts: the channel ended")
		}
		h, blobs, err := a.h, a.blobs, a.err
		i := -1
		if err == nil && h.Index >= 0 && h.Index < len(want) {
			i = h.Index
		}
		switch {
		case errors.Is(err, initproto.ErrTooLarge):
			return nil, "an artifact larger than the artifact cap", nil
		case err != nil:
			return nil, "", fmt.Errorf("reading an artifact: %w", err)
		case i < 0:
			return nil, fmt.Sprintf("artifact %d where its report names %d", h.Index, len(want)), nil
		case contents[i] != nil:
			return nil, fmt.Sprintf("artifact %d sent twice", i), nil
		case len(blobs) != 1 || int64(len(blobs[0])) != want[i].Size:
			return nil, fmt.Sprintf("artifact %s is not the size its report says", want[i].Path), nil
		}
		contents[i] = blobs[0]
	}
	return contents, "", nil
}

// finished ends a one-off box's channel once its report and artifacts are
// in: its runbox-init exits. A one-off box whose channel closes without it
// keeps its report for a server that comes back (Adopt).
func (c *channel) finished() {
	if c.end != nil {
		_ = c.end()
	}
	c.close()
}

// close ends the channel's multiplexer, its connection and its lane.
func (c *channel) close() {
	_ = c.mux.Close()
	_ = c.conn.Close()
	if l := c.lane.Load(); l != nil {
		_ = l.c.Close()
	}
}

// closed says whether the channel ended (the box, a flood between calls,
// or another server's attach reset it).
func (c *channel) closed() bool { return c.mux.IsClosed() }

// countingConn fails reads past its bound, so a box that floods its
// channel ends it instead of the server's memory. Each call sets the bound
// anew: a session's channel counts each call's bytes from its start.
type countingConn struct {
	io.ReadWriteCloser
	mu   sync.Mutex
	max  int64
	read int64
	// standing is what the box may send ahead on the exposed streams
	// open now (expose.go), which each call's bound keeps.
	standing int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	left := c.max - c.read
	c.mu.Unlock()
	if left <= 0 {
		return 0, errFlood
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.ReadWriteCloser.Read(p)
	c.mu.Lock()
	c.read += int64(n)
	c.mu.Unlock()
	return n, err
}

// bound starts a call's count: max bytes from now on.
func (c *countingConn) bound(max int64) {
	c.mu.Lock()
	c.max, c.read = max+c.standing, 0
	c.mu.Unlock()
}

// grant lets the box send n more bytes in this call (a peek's answer).
func (c *countingConn) grant(n int64) {
	c.mu.Lock()
	c.max += n
	c.mu.Unlock()
}

func (c *countingConn) over() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read >= c.max
}

func (c *countingConn) limit() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

var errFlood = errors.New("the box sent more than a run may")
