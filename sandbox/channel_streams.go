package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/stagetrace"
	"github.com/runbox-mcp/runbox/manifest"
)

// boxStreams serves the streams the box opens during one call, as the
// channel's accept loop hands them on: artifacts go to the report's
// collector, other kinds to the call's handlers.
type boxStreams struct {
	bounds initproto.Streams
	limits manifest.Limits
	ctx    context.Context
	cancel context.CancelFunc
	// arts carries the artifact streams read so far; made by the first
	// that needs it (artsOf), as most calls send none and it holds a
	// run's whole cap.
	arts     chan artifactStream
	artsOnce sync.Once
	// jobOpen is closed once the call's job stream is open: a peek
	// (peek.go) may follow it, never precede it.
	jobOpen chan struct{}
	jobOnce sync.Once

	accepted  int          // streams accepted (the accept loop's own)
	live      atomic.Int64 // accepted streams not yet done with
	open      atomic.Int64 // handler streams open now
	served    atomic.Int64 // handler streams over the run
	artifacts atomic.Int64 // artifact streams seen
	sent      atomic.Int64 // bytes the box sent on handler streams
	handlers  sync.WaitGroup
	why       atomic.Pointer[string]
	sess      *yamux.Session
	// call, for a session's call, is the Call its box's streams must
	// carry; 0 in a one-off run.
	call uint64
	// trace notes the call's stage times; nil when not traced.
	trace *stagetrace.Trace

	// mu guards the streams admitted and not yet done with, which end
	// releases: a session's channel outlives its calls, and no stream of
	// one call may wait into the next.
	mu      sync.Mutex
	streams map[*yamux.Stream]struct{}
	ended   bool
	// running counts the handlers running now (handlers' count).
	running int
}

// artifactStream is one artifact stream's message.
type artifactStream struct {
	h     initproto.Header
	blobs [][]byte
	err   error
}

// artsOf is the call's channel of artifact streams, with room for all a
// run may send: no stream's goroutine waits for the collector.
func (b *boxStreams) artsOf() chan artifactStream {
	b.artsOnce.Do(func() { b.arts = make(chan artifactStream, b.limits.Artifacts+1) })
	return b.arts
}

// openJob says the call's job stream is open (once).
func (b *boxStreams) openJob() { b.jobOnce.Do(func() { close(b.jobOpen) }) }

func newBoxStreams(ctx context.Context, l manifest.Limits, s *initproto.Streams) *boxStreams {
	ctx, cancel := context.WithCancel(ctx)
	return &boxStreams{bounds: s.Bounded(), limits: l, ctx: ctx, cancel: cancel,
		jobOpen: make(chan struct{}),
		streams: map[*yamux.Stream]struct{}{}}
}

// maxBytes is what the session may carry on top of the report and the
// artifacts: the handlers' bytes and the framing of every stream.
func (b *boxStreams) maxBytes() int64 {
	if len(b.bounds.Handlers) == 0 {
		return 0
	}
	return b.bounds.MaxBytes + int64(b.bounds.MaxTotal)*256
}

// broke records how the box broke the protocol (the first reason wins)
// and ends the session, which ends the run.
func (b *boxStreams) broke(format string, args ...any) {
	why := fmt.Sprintf(format, args...)
	if b.why.CompareAndSwap(nil, &why) && b.sess != nil {
		_ = b.sess.Close()
	}
}

// broken says how the box broke the protocol, or "".
func (b *boxStreams) broken() string {
	if p := b.why.Load(); p != nil {
		return *p
	}
	return ""
}

// admit counts a stream the box opened against the run's bounds and
// serves it; false once the box went past them (its session is ending).
// One goroutine at a time admits: the loop that accepts the streams.
func (b *boxStreams) admit(st *yamux.Stream) bool {
	// Everything accepted is bounded: the handlers' streams, the
	// artifacts, and the streams whose first message is on its way.
	maxLive := int64(b.bounds.MaxOpen + b.limits.Artifacts + initproto.MaxBoxStreams)
	b.accepted++
	if b.accepted > b.bounds.MaxTotal+b.limits.Artifacts {
		_ = st.Close()
		b.broke("it opened more than the %d streams a run may", b.bounds.MaxTotal)
		return false
	}
	if b.live.Add(1) > maxLive {
		_ = st.Close()
		b.broke("it opened more than %d streams at once", maxLive)
		return false
	}
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		b.live.Add(-1)
		refuse(st)
		return true
	}
	b.streams[st] = struct{}{}
	b.mu.Unlock()
	go b.serve(st)
	return true
}

// refuse ends a stream the box opened that nothing serves: the box reads
// its end at once, and whatever in it waits for an answer sees an error.
func refuse(st *yamux.Stream) {
	_ = st.SetReadDeadline(time.Now())
	_ = st.Close()
}

// serve reads a stream's first message and hands the stream on.
func (b *boxStreams) serve(st *yamux.Stream) {
	defer func() {
		b.mu.Lock()
		delete(b.streams, st)
		b.mu.Unlock()
		b.live.Add(-1)
	}()
	counted := &streamCounter{r: st}
	br := bufio.NewReaderSize(counted, 64<<10)
	var h initproto.Header
	blobs, err := initproto.ReceiveWith(br, &h, func() int64 {
		if h.Kind == initproto.StreamArtifact {
			return int64(b.limits.ArtifactBytes)
		}
		return b.bounds.MaxBytes - b.sent.Load()
	})
	if h.Kind == initproto.StreamArtifact {
		_ = st.Close()
		if b.artifacts.Add(1) > int64(b.limits.Artifacts) {
			b.broke("it sent more than the %d artifacts a run may", b.limits.Artifacts)
			return
		}
		b.artsOf() <- artifactStream{h: h, blobs: blobs, err: err}
		return
	}
	handler := b.bounds.Handlers[h.Kind]
	refuser, _ := handler.(initproto.StreamRefuser)
	tooLarge := errors.Is(err, initproto.ErrTooLarge)
	switch {
	case err == nil && h.Call != b.call:
		// Opened for an earlier call of the session, it reached the
		// server only now: that call's handlers are gone.
		refuse(st)
		return
	case tooLarge && (refuser == nil || h.Call != b.call):
		b.broke("it sent more than the %d bytes its streams may", b.bounds.MaxBytes)
	case err != nil && !tooLarge:
		// A stream the box gave up on before its first message.
	case handler == nil:
		b.broke("it opened a %q stream, which this run does not serve", h.Kind)
	case b.served.Add(1) > int64(b.bounds.MaxTotal):
		b.broke("it opened more than the %d streams a run may", b.bounds.MaxTotal)
	case b.open.Add(1) > int64(b.bounds.MaxOpen):
		b.open.Add(-1)
		b.broke("it kept more than %d streams open at once", b.bounds.MaxOpen)
	default:
		// From here on the handler's stream counts what it reads
		// against the run's bytes; a refused one's bytes are dropped
		// as they come, bounded by the session's whole bound alone.
		if !tooLarge && b.sent.Add(counted.take(b)) > b.bounds.MaxBytes {
			b.open.Add(-1)
			b.broke("it sent more than the %d bytes its streams may", b.bounds.MaxBytes)
			break
		}
		b.mu.Lock()
		if b.ended {
			b.mu.Unlock()
			b.open.Add(-1)
			break
		}
		b.handlers.Add(1)
		b.running++
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			b.running--
			b.mu.Unlock()
			b.handlers.Done()
		}()
		s := initproto.NewBoxStream(h, blobs, br, st, func() { b.open.Add(-1) })
		if tooLarge {
			// One request too large is that request's failure, not
			// the run's: the handler answers it, the run goes on.
			_, _ = io.Copy(io.Discard, br)
			refuser.RefuseStream(b.ctx, s)
		} else {
			handler.ServeStream(b.ctx, s)
		}
		_ = s.Close()
		return
	}
	_ = st.Close()
}

// end cancels the handlers, releases the streams still open and waits a
// little for the handlers: a handler that ignores its context is logged by
// nobody and outlives the run, but never holds the run's answer.
func (b *boxStreams) end() {
	b.cancel()
	// Streams still waiting for their first message, or for what their
	// handler reads, are released now: on a session's channel nothing
	// else would.
	b.mu.Lock()
	b.ended = true
	for st := range b.streams {
		_ = st.SetReadDeadline(time.Now())
	}
	// Once ended, no handler starts: with none running, there is
	// nothing to wait for (most calls, and every plain cell).
	idle := b.running == 0
	b.mu.Unlock()
	if idle {
		return
	}
	done := make(chan struct{})
	go func() {
		b.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(KillTimeout):
	}
}

// streamCounter counts what a stream reads: into itself until take, then
// into the run's total, failing a read past the bound.
type streamCounter struct {
	r   io.Reader
	n   int64
	run *boxStreams
}

func (c *streamCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.run == nil {
		c.n += int64(n)
		return n, err
	}
	if c.run.sent.Add(int64(n)) > c.run.bounds.MaxBytes {
		c.run.broke("it sent more than the %d bytes its streams may", c.run.bounds.MaxBytes)
		return n, errFlood
	}
	return n, err
}

// take switches the counter to the run's total and returns what it had.
func (c *streamCounter) take(run *boxStreams) int64 {
	c.run = run
	return c.n
}
