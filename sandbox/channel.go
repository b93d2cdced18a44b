package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// channel is the server's side of a box's channel: one stream multiplexer
// session over the box's attached stdin and stdout (internal/initproto).
// Everything it reads is bounded: the whole session, the report, each
// artifact, the streams the box may open, and the time artifacts may take
// once the report is in.
type channel struct {
	conn   Conn
	limits manifest.Limits
	// artifactWait bounds the artifacts' arrival once the report is in.
	artifactWait time.Duration
	// counted fails the session once the box sent more than maxStream.
	counted *countingConn
	mu      sync.Mutex
	sess    *yamux.Session
	// boxStreams serves the streams the box opens (channel_streams.go).
	*boxStreams
}

// collected is what came over the channel.
type collected struct {
	report   *initproto.Report
	contents [][]byte
	// violation says how the box broke the protocol (flooded, lied):
	// its report is not believed and it is killed.
	violation string
	err       error
}

// newChannel is the channel over conn; streams serve the streams the box
// opens during its run (nil: none), with ctx until the run ends.
func newChannel(ctx context.Context, conn Conn, l manifest.Limits, artifactWait time.Duration, streams *initproto.Streams) *channel {
	c := &channel{conn: conn, limits: l, artifactWait: artifactWait}
	c.boxStreams = newBoxStreams(ctx, l, streams)
	c.counted = &countingConn{Conn: conn, max: maxStream(l) + c.boxStreams.maxBytes()}
	return c
}

// maxStream bounds what is accepted from a box: the report with its capped
// output plus the artifacts, and room for the multiplexer's framing.
func maxStream(l manifest.Limits) int64 {
	return 4*int64(l.OutputBytes) + 2*int64(l.ArtifactBytes) + 4<<20
}

// maxReport bounds a report's output: both streams, capped by runbox-init,
// and their truncation markers.
func maxReport(l manifest.Limits) int64 {
	return 2*int64(l.OutputBytes) + 64<<10
}

// run sends the job and collects the report and the artifacts it names.
func (c *channel) run(job *initproto.Job) (got collected) {
	sess, err := yamux.Client(initproto.Coalesce(c.counted), initproto.MuxConfig())
	if err != nil {
		got.err = err
		return got
	}
	c.mu.Lock()
	c.sess = sess
	c.mu.Unlock()
	defer func() {
		if got.err != nil && c.counted.over() {
			got.violation = fmt.Sprintf("it sent more than the %d bytes a run may", c.counted.max)
		}
		if why := c.broken(); why != "" && got.violation == "" {
			got.violation = why
		}
	}()
	go c.accept(sess)
	st, err := sess.OpenStream()
	if err != nil {
		got.err = err
		return got
	}
	// A box that dies before reading its job must not block the report.
	go func() {
		_ = initproto.SendJob(st, job)
		_ = st.Close()
	}()
	rep, err := initproto.ReceiveReport(st, maxReport(c.limits))
	if err != nil {
		got.err = fmt.Errorf("reading the report: %w", err)
		if errors.Is(err, initproto.ErrTooLarge) {
			got.violation = "a report larger than its output limit"
		}
		return got
	}
	got.report = rep
	want, violation := sentArtifacts(rep, c.limits)
	if violation != "" {
		got.violation = violation
		return got
	}
	got.contents, got.violation, got.err = c.artifacts(want)
	if got.err != nil {
		// A report whose artifacts did not all come is not the run's.
		got.report, got.contents = nil, nil
	}
	return got
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

// artifacts takes one stream per artifact the report names as sent, as
// the accept loop read them.
func (c *channel) artifacts(want []initproto.Artifact) (contents [][]byte, violation string, err error) {
	return collectArtifacts(c.arts, c.lost, want, c.artifactWait)
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
			return nil, "", errors.New("waiting for artifacts: the session ended")
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

// close ends the session (and with it the connection); runbox-init exits.
func (c *channel) close() {
	c.mu.Lock()
	sess := c.sess
	c.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	_ = c.conn.Close()
	c.boxStreams.end()
}

// countingConn fails reads past max bytes, so a box that floods its
// channel ends its session instead of the server's memory.
type countingConn struct {
	Conn
	max  int64
	mu   sync.Mutex
	read int64
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
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) over() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read >= c.max
}

var errFlood = errors.New("the box sent more than a run may")

var _ io.ReadWriteCloser = (*countingConn)(nil)
