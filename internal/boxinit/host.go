//go:build linux

package boxinit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Host is the box's way to the server while a job runs: box-side services
// (the code's tool calls, its proxied connections) open streams to the
// host with it, over the box's channel, never through a socket or network
// of the host's. The server serves each kind with the run's handler, and
// treats a kind it has none for as a broken protocol. At most
// initproto.MaxBoxStreams are open at once; Open waits for a free place.
type Host struct {
	sess  *yamux.Session
	slots chan struct{}
	// call stamps the streams opened (Header.Call).
	call uint64
}

// NewHost is the host side of sess, for runbox-init and tests.
func NewHost(sess *yamux.Session) *Host {
	return &Host{sess: sess, slots: make(chan struct{}, initproto.MaxBoxStreams)}
}

// ForCall is h for a session's call: the streams it opens carry call
// (the job's Call), and share h's places among the open streams.
func (h *Host) ForCall(call uint64) *Host {
	if h == nil {
		return nil
	}
	return &Host{sess: h.sess, slots: h.slots, call: call}
}

// ErrNoHost is Open on a Host without a channel (runbox-init run outside a
// box, in tests).
var ErrNoHost = errors.New("runbox-init: no channel to the host")

// Open opens a stream of kind whose first message is a Header carrying
// data (JSON) and blobs, and returns it for the host's answer. Close it
// when done with it.
func (h *Host) Open(ctx context.Context, kind string, data any, blobs ...[]byte) (*HostStream, error) {
	if h == nil || h.sess == nil {
		return nil, ErrNoHost
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-h.sess.CloseChan():
		return nil, yamux.ErrSessionShutdown
	}
	st, err := h.sess.OpenStream()
	if err != nil {
		<-h.slots
		return nil, err
	}
	s := &HostStream{st: st, h: h}
	if err := initproto.Send(st, initproto.Header{Kind: kind, Data: raw, Call: h.call}, blobs...); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// HostStream is a stream the box opened to the host. Its place among the
// open streams is kept until the host has ended its side (Read saw the
// end), so the box never has more open than the server allows.
type HostStream struct {
	st   *yamux.Stream
	h    *Host
	once sync.Once
	mu   sync.Mutex
	done bool
}

// Read reads the host's answer.
func (s *HostStream) Read(p []byte) (int, error) {
	n, err := s.st.Read(p)
	if err != nil {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
	}
	return n, err
}

// Write sends more to the host after the first message.
func (s *HostStream) Write(p []byte) (int, error) { return s.st.Write(p) }

// CloseWrite tells the host the box sends nothing more; the answer can
// still be read.
func (s *HostStream) CloseWrite() error { return s.st.Close() }

// Close ends the stream. An answer not read to its end is drained in the
// background: the stream's place is free once the host let it go.
func (s *HostStream) Close() error {
	s.once.Do(func() {
		_ = s.st.Close()
		s.mu.Lock()
		done := s.done
		s.mu.Unlock()
		if done {
			<-s.h.slots
			return
		}
		go func() {
			_, _ = io.Copy(io.Discard, s.st)
			<-s.h.slots
		}()
	})
	return nil
}

var _ io.ReadWriteCloser = (*HostStream)(nil)
