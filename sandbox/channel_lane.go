package sandbox

import (
	"bufio"
	"context"
	"errors"
	"net"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// A session channel over a box's direct socket runs its cells on a lane
// (internal/initproto lane.go): a connection of its own that carries each
// cell's job and report as plain messages, written and read by the
// call's own goroutine, where a cells stream passes each through the
// multiplexer's send and receive loops on both ends. Everything else of
// the call (its artifacts, tool calls, proxied connections, an
// interrupt) stays on the channel.

// lane is a channel's cell lane.
type lane struct {
	c net.Conn
	r *bufio.Reader
}

// laneWait bounds opening a lane: the box's token, the dial and the
// box's answer to the hello.
const laneWait = 5 * time.Second

// inlineJob is the largest job a lane's writer sends itself: it fits the
// socket's buffer, so the write does not wait for the box to read. A
// larger one is sent aside, as a box that dies before reading its job
// must not block the report.
const inlineJob = 32 << 10

// openLane opens the channel's lane when its connection can dial one and
// its box offers one; nil otherwise (the cells go on a cells stream).
func (c *channel) openLane() *lane {
	ld, ok := c.conn.(LaneDialer)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), laneWait)
	defer cancel()
	token, err := c.laneToken()
	if err != nil {
		return nil
	}
	nc, err := ld.DialLane(ctx)
	if err != nil {
		return nil
	}
	_ = nc.SetDeadline(time.Now().Add(laneWait))
	if _, err = nc.Write(initproto.LaneHello(token)); err == nil {
		err = initproto.AwaitLaneAck(nc, token)
	}
	if err != nil {
		_ = nc.Close()
		return nil
	}
	_ = nc.SetDeadline(time.Time{})
	return &lane{c: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

// laneToken asks the box for a lane of this channel: a box that knows
// none closes the stream unanswered.
func (c *channel) laneToken() ([]byte, error) {
	st, err := c.mux.OpenStream()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(laneWait))
	if err := initproto.Send(st, initproto.Header{Kind: initproto.StreamLane}); err != nil {
		return nil, err
	}
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, initproto.LaneTokenSize)
	switch {
	case err != nil:
		return nil, err
	case h.Kind != initproto.StreamLane || len(blobs) != 1 || len(blobs[0]) != initproto.LaneTokenSize:
		return nil, errors.New("the box answered no lane token")
	}
	return blobs[0], nil
}

// runLane sends a session's job on the channel's lane and collects its
// outcome. A lane that fails is closed, and the channel's next cells go
// on a cells stream.
func (c *channel) runLane(l *lane, b *boxStreams, job *initproto.Job, wait time.Duration) collected {
	b.trace.Mark("host: cell lane ready")
	b.openJob()
	if jobSize(job) <= inlineJob {
		if err := initproto.SendCell(l.c, job); err != nil {
			_ = l.c.Close()
		}
		b.trace.Mark("host: job sent")
	} else {
		go func() {
			if err := initproto.SendCell(l.c, job); err != nil {
				_ = l.c.Close()
			}
			b.trace.Mark("host: job sent")
		}()
	}
	rep, err := initproto.ReceiveReport(l.r, maxReport(b.limits))
	if err != nil {
		_ = l.c.Close()
		c.lane.Store(nil)
		c.noLane = true
	}
	return c.answer(b, rep, err, wait)
}

// jobSize is what a job's message carries besides its header.
func jobSize(job *initproto.Job) int {
	n := len(job.Code) + len(job.Stdin)
	for _, f := range job.Files {
		n += len(f.Data)
	}
	return n
}
