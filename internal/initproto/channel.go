package initproto

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/yamux"
)

// Stream kinds: the first message on every stream names its kind, so one
// side can serve streams the other opens (a job, an artifact, and what comes
// next: a session's jobs, the code's tool calls, proxied connections).
const (
	// StreamJob is opened by the server: a Job, answered on the same
	// stream with a Report.
	StreamJob = "job"
	// StreamArtifact is opened by the box after its report: one artifact's
	// content, Index naming it among the report's sent artifacts.
	StreamArtifact = "artifact"
	// StreamProxy is opened by the box for each connection its program
	// made to runbox-init's proxy: after the header, the connection's raw
	// bytes both ways; the server reads the HTTP proxy request itself.
	StreamProxy = "proxy"
)

// UnplugArg, as runbox-init's only argument, makes it remove every
// network interface but lo from its network namespace and exit: the
// Kubernetes backend's init step.
const UnplugArg = "__unplug"

// ProxyAddr is where runbox-init's HTTP proxy listens in a box whose
// manifest declares endpoints: the box's loopback, the only interface it
// has.
const ProxyAddr = "127.0.0.1:3128"

// MaxBoxStreams bounds the streams a box keeps open at once besides the
// job's and its artifacts': runbox-init's services wait for a free one,
// and the server treats a box past it as breaking the protocol. Each
// connection a program makes through the proxy holds one while it is
// open (clients keep idle keep-alive connections), so this is as many as
// a program may reasonably open at once: 100 parallel requests work.
const MaxBoxStreams = 128

// Header opens every stream.
type Header struct {
	Kind string `json:"kind"`
	// Job rides with StreamJob; its code, stdin and files are the
	// message's blobs.
	Job *Job `json:"job,omitempty"`
	// Index is an artifact's place among the report's sent artifacts.
	Index int `json:"index,omitempty"`
	// Data is a kind's own request on a stream the box opens during its
	// run (a tool call's server, name and arguments; a connection's
	// target); its bulk travels as the message's blobs.
	Data json.RawMessage `json:"data,omitempty"`
	// Call names, on a stream a session's box opens during a job, the
	// job's Call: the server serves it only while that call runs (a
	// stream that reaches it later belongs to no call). 0 in a one-off box.
	Call uint64 `json:"call,omitempty"`
	// Run names the run a StreamCollect stream asks for (Job.RunID).
	Run string `json:"run,omitempty"`
}

// MaxHeader bounds a message's JSON line: a job's argv and environment, a
// report's figures; never its data, which travels as blobs.
const MaxHeader = 1 << 20

// ErrTooLarge is a message larger than the receiver's bound.
var ErrTooLarge = errors.New("initproto: message exceeds its bound")

// envelope is a message's JSON line: the body and the sizes of the raw
// blobs that follow it. Body is the receiver's value, decoded in the
// same pass as the line (a missing body leaves it as it was).
type envelope struct {
	Blobs []int64 `json:"blobs,omitempty"`
	Body  any     `json:"body"`
}

// Send writes one message: a JSON line with body and the blobs' sizes, then
// the blobs as raw bytes (never base64 inside JSON). The line is what
// json.Marshal makes of an envelope, the body encoded once: by
// appendBody for a cell's job and report, by encoding/json otherwise.
func Send(w io.Writer, body any, blobs ...[]byte) error {
	line := openLine(blobs)
	var ok bool
	if line, ok = appendBody(line, body); !ok {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		line = append(line, b...)
	}
	return writeMessage(w, line, blobs)
}

// openLine starts a message's line: the blobs' sizes, then the key of
// the body, which the caller appends.
func openLine(blobs [][]byte) []byte {
	line := make([]byte, 0, 512+8*len(blobs))
	line = append(line, '{')
	if len(blobs) > 0 {
		line = append(line, `"blobs":[`...)
		for i, blob := range blobs {
			if i > 0 {
				line = append(line, ',')
			}
			line = strconv.AppendInt(line, int64(len(blob)), 10)
		}
		line = append(line, "],"...)
	}
	return append(line, `"body":`...)
}

// writeMessage closes line, which holds the body, and writes it and the
// blobs.
func writeMessage(w io.Writer, line []byte, blobs [][]byte) error {
	line = append(line, '}')
	size := len(line) + 1
	for _, blob := range blobs {
		size += len(blob)
	}
	if size <= 64<<10 {
		// One write, as the buffered writer below would make, without
		// its 64 KiB buffer: a session cell's job and report are small.
		msg := slices.Grow(line, size-len(line))
		msg = append(msg, '\n')
		for _, blob := range blobs {
			msg = append(msg, blob...)
		}
		_, err := w.Write(msg)
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(append(line, '\n')); err != nil {
		return err
	}
	for _, blob := range blobs {
		if _, err := bw.Write(blob); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Receive reads one message into body and returns its blobs. limit bounds
// the blobs together; a message past it, or a JSON line past MaxHeader, is
// ErrTooLarge before anything of that size is allocated.
func Receive(r io.Reader, body any, limit int64) ([][]byte, error) {
	return ReceiveWith(r, body, func() int64 { return limit })
}

// ReceiveWith is Receive with the blobs' bound chosen once the body is
// decoded: a receiver that serves several kinds of stream bounds each
// kind's first message by what that kind may carry. A cell's job and
// report are decoded by decodeFast, anything else by encoding/json, with
// the same outcome either way. A reader that is a
// *bufio.Reader of at least 64 KiB is read through directly, so what
// follows the message stays in it for the next read.
func ReceiveWith(r io.Reader, body any, limit func() int64) ([][]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if line == nil && err == nil {
			// The whole line is in br's buffer: decode it there, before
			// the blobs are read from br (neither decoder keeps it).
			line = chunk
			break
		}
		line = append(line, chunk...)
		if len(line) > MaxHeader {
			return nil, fmt.Errorf("%w: a header of more than %d bytes", ErrTooLarge, MaxHeader)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	sizes, ok := decodeFast(line, body)
	if !ok {
		// Here only, so that the fast path does not put env on the heap.
		env := envelope{Body: body}
		if err := json.Unmarshal(line, &env); err != nil {
			return nil, fmt.Errorf("initproto: bad header: %w", err)
		}
		sizes = env.Blobs
	}
	var total int64
	max := limit()
	for _, n := range sizes {
		if n < 0 {
			return nil, fmt.Errorf("initproto: a blob of %d bytes", n)
		}
		if total += n; total > max {
			return nil, fmt.Errorf("%w: %d bytes of data, at most %d", ErrTooLarge, total, max)
		}
	}
	blobs := make([][]byte, len(sizes))
	for i, n := range sizes {
		b, err := readBlob(br, n)
		if err != nil {
			return nil, err
		}
		blobs[i] = b
	}
	return blobs, nil
}

// smallBlob is the size up to which readBlob trusts a blob's size.
const smallBlob = 64 << 10

// readBlob reads a blob of n bytes, never nil. A small one is read into a
// buffer of its size: a cell's code and output are mostly a few bytes,
// which io.ReadAll would read into 512. A larger one grows with what
// arrives rather than trusting the size up front.
func readBlob(r io.Reader, n int64) ([]byte, error) {
	if n <= smallBlob {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

// SendJob opens a job stream's message: the header, then the code, stdin
// and each input file as blobs.
func SendJob(w io.Writer, job *Job) error {
	return sendJob(w, StreamJob, job)
}

// sendJob sends job as the message of a stream of kind.
func sendJob(w io.Writer, kind string, job *Job) error {
	blobs := [][]byte{job.Code, job.Stdin}
	for _, f := range job.Files {
		blobs = append(blobs, f.Data)
	}
	// Encoded here, not by Send: a Header passed as an any would be put
	// on the heap for json.Marshal's sake.
	h := Header{Kind: kind, Job: job}
	return writeMessage(w, appendHeader(openLine(blobs), &h), blobs)
}

// JobBlobs puts a job message's blobs back into its job.
func JobBlobs(job *Job, blobs [][]byte) error {
	if len(blobs) != 2+len(job.Files) {
		return fmt.Errorf("initproto: a job with %d files carries %d blobs", len(job.Files), len(blobs))
	}
	job.Code, job.Stdin = blobs[0], blobs[1]
	for i := range job.Files {
		job.Files[i].Data = blobs[2+i]
	}
	return nil
}

// SendReport answers a job: the report, then its stdout and stderr as blobs.
func SendReport(w io.Writer, rep *Report) error {
	return Send(w, rep, rep.Stdout, rep.Stderr)
}

// ReceiveReport reads a job's answer; limit bounds its output.
func ReceiveReport(r io.Reader, limit int64) (*Report, error) {
	var rep Report
	blobs, err := Receive(r, &rep, limit)
	if err != nil {
		return nil, err
	}
	if len(blobs) != 2 {
		return nil, fmt.Errorf("initproto: a report carries %d blobs, not 2", len(blobs))
	}
	rep.Stdout, rep.Stderr = blobs[0], blobs[1]
	return &rep, nil
}

// MuxConfig is the stream multiplexer's configuration on both ends of a
// box's channel. No keep-alives: the server's deadlines bound a box that
// stops answering. A write that the other side does not read for
// WriteTimeout fails instead of blocking forever. No close timeout
// either: a stream the server half-closes after sending a job waits for
// the report as long as the job runs, and the session, which the server
// closes when the run ends, frees every stream with it.
func MuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = false
	c.AcceptBacklog = 64
	c.MaxStreamWindowSize = 1 << 20
	c.ConnectionWriteTimeout = WriteTimeout
	c.StreamOpenTimeout = WriteTimeout
	c.StreamCloseTimeout = 0
	c.LogOutput = io.Discard
	return c
}

// WriteTimeout bounds a write the other side does not read.
const WriteTimeout = 10 * time.Second

// The code's tool calls: the in-box libraries (runbox_tools for Python and
// JavaScript) live in ToolsLib and reach runbox-init on ToolsSocket, a
// unix socket inside the box; runbox-init carries each call to the server
// on a stream of kind StreamTool, whose request is the first message's
// blob (JSON) and whose answer is one message whose blob is the JSON the
// in-box library reads.
const (
	StreamTool  = "tool"
	ToolsLib    = "/tmp/.runbox/lib"
	ToolsSocket = "/tmp/.runbox/tools.sock"
)

// CABundle is the file a box's TLS clients trust when the manifest has an
// entry with a credential: the image's own CAs and runbox's CA, written
// read-only by runbox-init from the certificate the job carries (Job.CA,
// Session.CA) before the program starts. SystemCAs are where images keep
// their own: the first that exists is used (Debian and Alpine, Fedora and
// RHEL, openSUSE, others).
const CABundle = "/tmp/.runbox/ca-certificates.crt"

var SystemCAs = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}

// RunnerLib holds the language runners runbox-init ships with itself and
// writes before any interpreter starts: TypeScriptRunner type-checks,
// transpiles and runs a TypeScript program (`node TypeScriptRunner FILE`)
// with the image's compiler; a session's driver loads it for its cells.
const (
	RunnerLib        = "/tmp/.runbox/run"
	TypeScriptRunner = RunnerLib + "/runbox_ts.js"
)
