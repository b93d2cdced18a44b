package initproto

import (
	"bufio"
	"context"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// StreamHandler serves, on the server, one kind of stream that a box
// opens while its job runs: the code's tool calls, its proxied
// connections. The handler owns the stream until it returns; the stream
// is closed after it in any case. ctx ends when the run does (the report
// is in, the box was killed, the call was cancelled): a handler must
// return soon after, cancelling what it started for the box.
type StreamHandler interface {
	ServeStream(ctx context.Context, s *BoxStream)
}

// StreamHandlerFunc is a function that serves streams.
type StreamHandlerFunc func(ctx context.Context, s *BoxStream)

// ServeStream calls f.
func (f StreamHandlerFunc) ServeStream(ctx context.Context, s *BoxStream) { f(ctx, s) }

// Streams are one run's handlers for the streams its box opens, by
// [Header] Kind, and their bounds. A box that opens a kind with no
// handler, or goes past a bound, breaks the channel protocol: it is
// killed and its run is a sandbox failure, as for any other flood; but a
// first message too large for a [StreamRefuser]'s kind is that stream's
// refusal alone. Bounds left zero take the defaults ([Streams.Bounded]).
type Streams struct {
	Handlers map[string]StreamHandler
	// MaxOpen bounds the streams open at once; default and at most
	// [MaxBoxStreams], which runbox-init keeps to.
	MaxOpen int
	// MaxTotal bounds the streams over the whole run; default
	// [DefaultMaxStreams]. Policy limits (tool calls per run) belong to
	// the handlers, which answer them with errors the code sees; this
	// only stops a flood.
	MaxTotal int
	// MaxBytes bounds what the box sends on them together; default
	// [DefaultMaxStreamBytes].
	MaxBytes int64
	// Budgets are, by kind, what runbox-init's services may send on
	// that kind's streams in all (Job.StreamBudgets): they refuse a
	// request past it themselves. Each must leave MaxBytes room for the
	// others.
	Budgets map[string]int64
}

// The bounds of a run's streams that Streams leave zero.
const (
	DefaultMaxStreams     = 1 << 16
	DefaultMaxStreamBytes = 256 << 20
)

// StreamRefuser is a StreamHandler that answers, itself, a stream whose
// first message is larger than the run's streams may still carry: the
// message is read and dropped and the handler writes its refusal (a tool
// call's limit error), where the box would otherwise be killed. The bytes
// dropped still count against the session's whole bound.
type StreamRefuser interface {
	StreamHandler
	RefuseStream(ctx context.Context, s *BoxStream)
}

// Kinds are the kinds s serves, sorted (Job.Streams); none for nil.
func (s *Streams) Kinds() []string {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Handlers))
}

// Bounded is s with its defaults filled in; nil serves no kind.
func (s *Streams) Bounded() Streams {
	var b Streams
	if s != nil {
		b = *s
	}
	if b.MaxOpen <= 0 || b.MaxOpen > MaxBoxStreams {
		b.MaxOpen = MaxBoxStreams
	}
	if b.MaxTotal <= 0 {
		b.MaxTotal = DefaultMaxStreams
	}
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultMaxStreamBytes
	}
	return b
}

// BoxStream is a stream the box opened, its first message already read:
// Header (with the kind's Data) and Blobs are the box's request. Read
// returns what the box sends after it (read a further message with
// Receive(s.Reader(), ...)); Write sends to the box; Close ends the
// server's side (the box reads EOF after what was written).
type BoxStream struct {
	Header Header
	Blobs  [][]byte

	r       *bufio.Reader
	st      *yamux.Stream
	once    sync.Once
	release func()
}

// NewBoxStream is the stream st whose first message, h and blobs, was
// read through r, which goes on reading it; release, if set, runs once at
// Close, before the stream ends.
func NewBoxStream(h Header, blobs [][]byte, r *bufio.Reader, st *yamux.Stream, release func()) *BoxStream {
	return &BoxStream{Header: h, Blobs: blobs, r: r, st: st, release: release}
}

// Reader reads what the box sends after its first message.
func (s *BoxStream) Reader() *bufio.Reader { return s.r }

// Read reads what the box sends after its first message.
func (s *BoxStream) Read(p []byte) (int, error) { return s.r.Read(p) }

// Write sends p to the box.
func (s *BoxStream) Write(p []byte) (int, error) { return s.st.Write(p) }

// SetReadDeadline bounds the wait for what the box sends; a time in the
// past releases a read that waits now (Close only half-closes).
func (s *BoxStream) SetReadDeadline(t time.Time) error { return s.st.SetReadDeadline(t) }

// Close ends the server's side of the stream; it frees the stream's place
// among those open at once before the box can see the end, so the box may
// open the next one at once.
func (s *BoxStream) Close() error {
	var err error
	s.once.Do(func() {
		if s.release != nil {
			s.release()
		}
		err = s.st.Close()
	})
	return err
}

var _ io.ReadWriteCloser = (*BoxStream)(nil)
