package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// A run that outlasts its call's answer shows its output so far: the
// runner asks its box over the live run's channel (initproto.StreamPeek),
// by run id. A peek is bounded in time and bytes and never breaks the
// run: a box that does not answer in time, or answers too much or
// nonsense, is only not known this time.

// Peek is a running run's output so far, as its box captured it: each
// stream's head and tail (valid UTF-8, a marker where bytes are cut) and
// the bytes written to it so far.
type Peek struct {
	Stdout, Stderr                   string
	StdoutBytes, StderrBytes         int64
	StdoutTruncated, StderrTruncated bool
}

// PeekWait bounds a peek: a box that has not answered within it is not
// known this time.
const PeekWait = 2 * time.Second

// peekBytes is what a peek asks of each stream: what an answer can show
// of it (limits.answer_output_chars, one byte a character), within what
// the box keeps.
func peekBytes(l manifest.Limits) int {
	return max(2, min(l.AnswerChars, int(l.OutputBytes), initproto.MaxPeekBytes))
}

// peekAllowance is what a peek's answer may take of the channel's
// bytes, granted beside the run's own: what the answer may be, and what
// the box may have sent on the stream before its bound is seen (one
// stream window) with its framing.
func peekAllowance(max int) int64 {
	return initproto.PeekLimit(max) + 256<<10 + 16<<10
}

// liveRun is a run whose call is on its box's channel now.
type liveRun struct {
	ch  *channel
	bs  *boxStreams
	max int
	// busy holds the one peek of the run in flight: a box slow to answer
	// does not pile up peeks.
	busy chan struct{}
}

// liveRuns are the runner's runs on their channels, by run id.
type liveRuns struct {
	mu   sync.Mutex
	runs map[string]*liveRun
}

// add lists run id's call, on ch with its streams bs and limits l, for
// peeks; the returned func unlists it.
func (l *liveRuns) add(id string, ch *channel, bs *boxStreams, lim manifest.Limits) func() {
	lr := &liveRun{ch: ch, bs: bs, max: peekBytes(lim), busy: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.runs == nil {
		l.runs = map[string]*liveRun{}
	}
	l.runs[id] = lr
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.runs[id] == lr {
			delete(l.runs, id)
		}
		l.mu.Unlock()
	}
}

func (l *liveRuns) get(id string) *liveRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[id]
}

// Peek asks run id's box for its output so far; false when it is not
// known: no such run on a channel now (not begun, or over), a peek of it
// already in flight, or a box that did not answer within PeekWait (or
// ctx) or answered past the bounds.
func (r *BoxRunner) Peek(ctx context.Context, id string) (Peek, bool) {
	lr := r.peeks.get(id)
	if lr == nil {
		r.log.Debug("a peek of a run not on its channel", "run_id", id)
		return Peek{}, false
	}
	select {
	case lr.busy <- struct{}{}:
	default:
		r.log.Debug("a peek while another is in flight", "run_id", id)
		return Peek{}, false
	}
	got := make(chan *initproto.Peek, 1)
	go func() {
		p, err := lr.ch.peek(lr.bs, lr.max)
		if err != nil {
			r.log.Debug("a peek went unanswered", "run_id", id, "err", err)
		}
		<-lr.busy
		got <- p
	}()
	timer := time.NewTimer(PeekWait)
	defer timer.Stop()
	var p *initproto.Peek
	select {
	case p = <-got:
	case <-timer.C:
	case <-ctx.Done():
	}
	if p == nil || !p.Running {
		r.log.Debug("a peek is not known", "run_id", id, "answered", p != nil)
		return Peek{}, false
	}
	return Peek{Stdout: validText(p.Stdout), Stderr: validText(p.Stderr), StdoutBytes: p.StdoutBytes, StderrBytes: p.StderrBytes,
		StdoutTruncated: p.StdoutTruncated, StderrTruncated: p.StderrTruncated}, true
}

var errJobNotOpen = errors.New("the job's stream is not open yet")

// peek asks the box for the output so far of the call whose streams are
// b, each stream within max bytes, within PeekWait. Its bytes are granted
// beside the call's, and whatever goes wrong ends this stream alone.
func (c *channel) peek(b *boxStreams, max int) (*initproto.Peek, error) {
	// A one-off box takes the first stream it is opened as its job's.
	select {
	case <-b.jobOpen:
	case <-time.After(PeekWait):
		return nil, errJobNotOpen
	}
	c.counted.grant(peekAllowance(max))
	st, err := c.mux.OpenStream()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(PeekWait))
	if err := initproto.SendPeekRequest(st, max); err != nil {
		return nil, err
	}
	p, err := initproto.ReceivePeek(st, initproto.PeekLimit(max))
	if err != nil {
		return nil, err
	}
	if int64(len(p.Stdout)) > p.StdoutBytes+int64(len(initproto.TruncationMarker))+20 ||
		int64(len(p.Stderr)) > p.StderrBytes+int64(len(initproto.TruncationMarker))+20 {
		return nil, errors.New("a peek that shows more than it counts")
	}
	return p, nil
}
