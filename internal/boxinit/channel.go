//go:build linux

package boxinit

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// maxJobBytes bounds a job's code, stdin and files together; the server
// enforces smaller limits, this only stops a runaway.
const maxJobBytes = 512 << 20

// linger bounds the wait, after the last artifact, for the server to end
// the session: it reads everything, then closes.
const linger = 10 * time.Second

// stdio joins the box's attached stdin and stdout into the channel's
// connection.
type stdio struct {
	r io.Reader
	w io.Writer
}

func (s stdio) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s stdio) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s stdio) Close() error {
	if c, ok := s.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// serve runs the box's side of the channel: it accepts the job stream,
// runs the job, answers with the report on the same stream and sends each
// artifact on a stream of its own. It returns the process's exit code.
func serve(conn io.ReadWriteCloser, opts Options) int {
	sess, err := yamux.Server(initproto.Coalesce(conn), initproto.MuxConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: channel:", err)
		return 70
	}
	defer sess.Close()
	st, err := sess.AcceptStream()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: waiting for the job:", err)
		return 71
	}
	// The server's further streams (peeks) are accepted from now on: a
	// stream left unaccepted past the multiplexer's open timeout would
	// end the session, and a large job takes a while to read.
	opts.Live = &liveOutput{}
	go acceptRunStreams(sess, opts.Live)
	job, err := receiveJob(st)
	var rep *initproto.Report
	var contents [][]byte
	if err != nil {
		rep = &initproto.Report{InitError: "reading job: " + err.Error()}
	} else {
		opts.Host = NewHost(sess)
		rep, contents = Run(context.Background(), job, opts)
	}
	// A write can fail after its data went out, when the server ends the
	// session as soon as it has read it: that is not a failure.
	failed := func(what string, err error) int {
		if sess.IsClosed() {
			return 0
		}
		fmt.Fprintf(os.Stderr, "runbox-init: sending %s: %v\n", what, err)
		return 71
	}
	if err := initproto.SendReport(st, rep); err != nil {
		return failed("the report", err)
	}
	_ = st.Close()
	for i, c := range contents {
		if err := sendArtifact(sess, i, c); err != nil {
			return failed("an artifact", err)
		}
	}
	select {
	case <-sess.CloseChan():
	case <-time.After(linger):
	}
	return 0
}

func receiveJob(st io.Reader) (*initproto.Job, error) {
	var h initproto.Header
	blobs, err := initproto.Receive(st, &h, maxJobBytes)
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

func sendArtifact(sess *yamux.Session, index int, data []byte) error {
	st, err := sess.OpenStream()
	if err != nil {
		return err
	}
	defer st.Close()
	return initproto.Send(st, initproto.Header{Kind: initproto.StreamArtifact, Index: index}, data)
}
