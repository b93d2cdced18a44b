//go:build linux

package boxinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// maxJobBytes bounds a job's code, stdin and files together; the server
// enforces smaller limits, this only stops a runaway.
const maxJobBytes = 512 << 20

// serve runs a one-off box's side of its channel, which may be opened
// again: each channel starts with a reset (internal/initproto reset.go),
// answered before its multiplexer session. The first job stream starts the
// box's one job, which runs to its end whatever becomes of the channel
// (its own deadline applies); its report is answered on that stream, its
// artifacts on streams of their own. When that channel broke (its server
// died), a later channel's collect stream naming the run gets the same
// answer. The box exits when the server ends the channel (it has what it
// needed); when stdin ends (nobody can reach the box again), once the job
// is over; or the job's KeepMs after its end, when nobody collected it. It
// returns the process's exit code.
func serve(in io.Reader, out io.Writer, opts Options) int {
	opts.Live = &liveOutput{}
	o := &oneOff{opts: opts, started: make(chan *kept, 1)}
	ended := make(chan error, 1)
	go func() { ended <- o.channels(in, out) }()
	var job *kept
	var done <-chan struct{}
	var expired <-chan time.Time
	for {
		select {
		case err := <-ended:
			if job != nil && !errors.Is(err, initproto.ErrEnded) {
				// The job still has its deadline.
				<-job.done
			}
			return 0
		case job = <-o.started:
			done = job.done
		case <-done:
			done = nil
			expired = time.After(job.keep)
		case <-expired:
			fmt.Fprintln(os.Stderr, "runbox-init: nobody collected the run's report; exiting")
			return 0
		}
	}
}

// oneOff is a one-off box's state across its channels: its one job.
type oneOff struct {
	opts    Options
	started chan *kept
	mu      sync.Mutex
	job     *kept
}

// channels serves each channel in turn until the server ends one
// (initproto.ErrEnded) or stdin ends. When stdin ends with the job held
// (its server died, and on Podman stdin ends with it), a box with a relay
// serves the relay's channels instead.
func (o *oneOff) channels(in io.Reader, out io.Writer) error {
	err := channelsOn(in, out, true, o.accept)
	if errors.Is(err, initproto.ErrEnded) || o.opts.Relay == nil || !o.holds() {
		return err
	}
	return o.opts.Relay.channels(true, o.accept)
}

func (o *oneOff) holds() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.job != nil
}

// accept serves the streams of one channel's multiplexer session.
func (o *oneOff) accept(sess *yamux.Session) {
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		go o.stream(sess, st)
	}
}

// channelsOn serves each channel in and out carry, in turn: a reset opens
// each (internal/initproto reset.go) and is answered before its
// multiplexer session, which serve has until the session ends. It returns
// when in ends, or when a server ends a channel for good
// (initproto.ErrEnded) and final (a session's never is).
func channelsOn(in io.Reader, out io.Writer, final bool, serve func(*yamux.Session)) error {
	rr := &lockedReader{rr: initproto.NewResetReader(in)}
	ew := &epochWriter{w: out}
	for {
		nonce, err := rr.await()
		if errors.Is(err, initproto.ErrEnded) && !final {
			continue
		}
		if err != nil {
			return err
		}
		w, err := ew.next(initproto.Ack(nonce))
		if err != nil {
			continue
		}
		sess, err := yamux.Server(initproto.Coalesce(rwc{rr, w}), initproto.MuxConfig())
		if err != nil {
			continue
		}
		serve(sess)
		_ = sess.Close()
	}
}

// stream serves one stream the server opened: the job (the box's first
// and only one) or a collect of it.
func (o *oneOff) stream(sess *yamux.Session, st *yamux.Stream) {
	defer st.Close()
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, maxJobBytes)
	if err == nil && h.Kind == initproto.StreamPeek {
		servePeek(st, h, o.opts.Live)
		return
	}
	var k *kept
	if err == nil && h.Kind == initproto.StreamCollect {
		o.mu.Lock()
		k = o.job
		o.mu.Unlock()
		if k == nil || h.Run == "" || h.Run != k.id {
			return
		}
	} else {
		job, err := jobOf(h, blobs, err)
		id := ""
		if job != nil {
			id = job.RunID
		}
		o.mu.Lock()
		if o.job == nil {
			k = newKept(id)
			k.keep = initproto.DefaultKeep
			if job != nil && job.KeepMs > 0 {
				k.keep = time.Duration(job.KeepMs) * time.Millisecond
			}
			o.job = k
		}
		o.mu.Unlock()
		if k == nil {
			return // a second job: the box runs one
		}
		o.started <- k
		if err != nil {
			k.finish(&initproto.Report{InitError: "reading job: " + err.Error()}, nil)
		} else {
			opts := o.opts
			opts.Host = NewHost(sess)
			go func() { k.finish(Run(context.Background(), job, opts)) }()
		}
	}
	_ = k.deliver(sess, st)
}

// jobOf is the job a job stream's first message carries.
func jobOf(h initproto.Header, blobs [][]byte, err error) (*initproto.Job, error) {
	if err != nil {
		return nil, err
	}
	if h.Kind != initproto.StreamJob || h.Job == nil {
		return nil, fmt.Errorf("the first stream is %q, not a job", h.Kind)
	}
	if err := initproto.JobBlobs(h.Job, blobs); err != nil {
		return nil, err
	}
	return h.Job, nil
}

// kept is a run's outcome, kept by its run id until a server has it: a
// one-off box's job, a session's cell.
type kept struct {
	id   string
	keep time.Duration
	done chan struct{}

	rep      *initproto.Report
	contents [][]byte
}

func newKept(id string) *kept { return &kept{id: id, done: make(chan struct{})} }

func (k *kept) finish(rep *initproto.Report, contents [][]byte) {
	k.rep, k.contents = rep, contents
	close(k.done)
}

// deliver answers the run's report on st once the run has ended, then
// sends its artifacts; it gives up when the channel ends first (the
// outcome stays kept for the next one).
func (k *kept) deliver(sess *yamux.Session, st io.WriteCloser) error {
	return k.send(sess, st, true)
}

// send is deliver, leaving st open when closeAfter is false (a cells
// stream, or a lane, carries the next cell).
func (k *kept) send(sess *yamux.Session, st io.WriteCloser, closeAfter bool) error {
	select {
	case <-k.done:
	case <-sess.CloseChan():
		return errReplaced
	}
	if err := initproto.SendReport(st, k.rep); err != nil {
		return err
	}
	if closeAfter {
		_ = st.Close()
	}
	for i, c := range k.contents {
		if err := sendArtifact(sess, i, c); err != nil {
			return err
		}
	}
	return nil
}

func sendArtifact(sess *yamux.Session, index int, data []byte) error {
	st, err := sess.OpenStream()
	if err != nil {
		return err
	}
	defer st.Close()
	return initproto.Send(st, initproto.Header{Kind: initproto.StreamArtifact, Index: index}, data)
}
