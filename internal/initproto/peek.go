package initproto

import (
	"encoding/json"
	"fmt"
	"io"
)

// StreamPeek is opened by the server while a job runs, to show the output
// so far of a run that outlasts its call's answer: the first message's
// Data is a [PeekRequest]; runbox-init answers on the same stream with
// one [Peek] message, stdout and stderr as its blobs. A peek reads the
// job's capture without disturbing it or the program.
const StreamPeek = "peek"

// MaxPeekBytes bounds what a peek may ask of each stream.
const MaxPeekBytes = 1 << 20

// PeekRequest is a peek's question.
type PeekRequest struct {
	// MaxBytes bounds each stream's bytes in the answer (its head and
	// tail, TruncationMarker between them, besides), at most
	// MaxPeekBytes.
	MaxBytes int `json:"max_bytes"`
}

// Peek is what runbox-init has captured so far of the running job's
// output: each stream's head and tail around a TruncationMarker, within
// the request's bound, and the bytes the program wrote to it so far.
type Peek struct {
	// Running: a program of the job has started (its output is being
	// captured); false before, when nothing is known yet.
	Running         bool   `json:"running"`
	Stdout          []byte `json:"-"`
	Stderr          []byte `json:"-"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
}

// SendPeekRequest opens a peek stream's message.
func SendPeekRequest(w io.Writer, max int) error {
	data, err := json.Marshal(PeekRequest{MaxBytes: max})
	if err != nil {
		return err
	}
	return Send(w, Header{Kind: StreamPeek, Data: data})
}

// PeekBound is the request's bound on each stream, from a header's Data:
// at least 2 bytes and at most MaxPeekBytes.
func PeekBound(h Header) int {
	var req PeekRequest
	_ = json.Unmarshal(h.Data, &req)
	return min(max(req.MaxBytes, 2), MaxPeekBytes)
}

// SendPeek answers a peek: the figures, then stdout and stderr as blobs.
func SendPeek(w io.Writer, p *Peek) error {
	return Send(w, p, p.Stdout, p.Stderr)
}

// ReceivePeek reads a peek's answer; limit bounds its two streams
// together.
func ReceivePeek(r io.Reader, limit int64) (*Peek, error) {
	var p Peek
	blobs, err := Receive(r, &p, limit)
	if err != nil {
		return nil, err
	}
	if len(blobs) != 2 {
		return nil, fmt.Errorf("initproto: a peek carries %d blobs, not 2", len(blobs))
	}
	if p.StdoutBytes < 0 || p.StderrBytes < 0 {
		return nil, fmt.Errorf("initproto: a peek of %d and %d bytes", p.StdoutBytes, p.StderrBytes)
	}
	p.Stdout, p.Stderr = blobs[0], blobs[1]
	return &p, nil
}

// PeekLimit is what a peek's answer to a request of max bytes per stream
// may carry: both streams and their truncation markers.
func PeekLimit(max int) int64 {
	return 2*int64(max) + 2*int64(len(TruncationMarker)+20)
}
