package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/internal/tasks"
	"github.com/runbox-mcp/runbox/tools"
)

// stdio serves the layer on a stdio connection, which owns its tasks:
// line answers a client's line the layer serves, and out is w less the
// messages about tasks' calls.
func (l *taskLayer) stdio(w io.Writer) (line func(line []byte, toMCP io.Writer) []byte, out io.Writer) {
	owner := "stdio/" + tasks.NewID()
	if l.disk != nil {
		// Tasks that outlive the process belong to the local user of
		// the state directory, as the run handle's runs do: the task id
		// (130 random bits) is the capability.
		owner = tools.LocalPrincipal
	}
	return func(line []byte, toMCP io.Writer) []byte { return l.stdioLine(owner, line, toMCP) }, taskFilter{l: l, w: w}
}

// stdioLine answers a line that the layer serves, and hands a task's call
// to mcp-go; nil passes the line on untouched.
func (l *taskLayer) stdioLine(owner string, line []byte, toMCP io.Writer) []byte {
	req, p, ok := l.classify(line)
	if !ok {
		return nil
	}
	if req.Method != string(mcp.MethodToolsCall) {
		resp, _ := l.answer(owner, req, p)
		return resp
	}
	send := func(id string, inner []byte) (context.CancelFunc, error) {
		return l.sendInConnection(id, inner, func(b []byte) error {
			_, err := toMCP.Write(append(b, '\n'))
			return err
		})
	}
	t := l.start(owner, p.Name, line, send)
	if t == nil {
		return nil
	}
	return createdAnswer(req.ID, *t)
}

// sendInConnection hands task id's call to mcp-go as a request of the
// client's own connection (stdio, an SSE session), through write, and
// returns its cancel.
func (l *taskLayer) sendInConnection(id string, inner []byte, write func([]byte) error) (context.CancelFunc, error) {
	answered := make(chan struct{})
	l.answered.Store(id, answered)
	if err := write(inner); err != nil {
		l.answered.Delete(id)
		return nil, err
	}
	// The call is mcp-go's request on this connection: a cancelled
	// notification for its id cancels its context. mcp-go takes requests
	// in workers and notifications at once, so a cancel may come before
	// the request is in flight and miss it: it is said again until the
	// call answers.
	var once sync.Once
	return func() {
		once.Do(func() {
			note, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": mcp.MethodNotificationCancelled,
				"params": map[string]any{"requestId": taskIDPrefix + id, "reason": "tasks/cancel"}})
			go func() {
				for {
					select {
					case <-answered:
						return
					default:
					}
					if write(note) != nil {
						return
					}
					select {
					case <-answered:
						return
					case <-time.After(cancelAgain):
					}
				}
			}()
		})
	}, nil
}

// cancelAgain is how often a task's cancel is said again to mcp-go on
// stdio and SSE until its call answers.
const cancelAgain = 100 * time.Millisecond

// taskFilter passes mcp-go's messages to the client, keeping back those
// about a task's call (its progress and answer), which go to the task.
type taskFilter struct {
	l *taskLayer
	w io.Writer
}

func (f taskFilter) Write(p []byte) (int, error) {
	if ours, _ := f.l.fromMCP(bytes.TrimSpace(p), ""); ours {
		return len(p), nil
	}
	return f.w.Write(p)
}

// readTaskBody returns r's body for the layer: as the listener holds it
// (bodyLimit), read once for every layer.
func readTaskBody(r *http.Request) ([]byte, bool) {
	return heldBytes(r)
}

// http puts the layer in front of the streamable HTTP endpoint: the
// bearer token's name owns the tasks. A task's call is served by next on
// a request of the layer's own, which outlives the client's POST.
func (l *taskLayer) http(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readTaskBody(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		req, p, ok := l.classify(body)
		// The header must name the body's version (mcp-go refuses a
		// request whose two disagree).
		if !ok || r.Header.Get(mcp.HeaderProtocolVersion) != p.Meta.ProtocolVersion {
			next.ServeHTTP(w, r)
			return
		}
		owner := tools.PrincipalOf(r.Context())
		if req.Method != string(mcp.MethodToolsCall) {
			resp, code := l.answer(owner, req, p)
			writeRPC(w, code, resp)
			return
		}
		// The call's request as the client sent it, headers and all,
		// kept past this POST for each time the call is made.
		orig := r.Clone(context.WithoutCancel(r.Context()))
		send := func(id string, inner []byte) (context.CancelFunc, error) {
			ctx, cancel := context.WithCancel(orig.Context())
			unhook := context.AfterFunc(l.base, cancel)
			ir := orig.Clone(ctx)
			holdBody(ir, inner)
			go func() {
				defer cancel()
				defer unhook()
				rec := &taskRecorder{l: l, task: id, header: http.Header{}}
				next.ServeHTTP(rec, ir)
				rec.flushLines(true)
				if !rec.answered {
					l.failInternal(id, "the call ended without an answer (HTTP "+http.StatusText(rec.statusCode())+")")
				}
			}()
			return cancel, nil
		}
		t := l.start(owner, p.Name, body, send)
		if t == nil {
			next.ServeHTTP(w, r)
			return
		}
		writeRPC(w, 0, createdAnswer(req.ID, *t))
	})
}

// writeRPC writes a JSON-RPC answer with the HTTP status mcp-go gives
// its code.
func writeRPC(w http.ResponseWriter, code int, resp []byte) {
	status := http.StatusOK
	if code == mcp.INVALID_PARAMS || code == mcp.MISSING_REQUIRED_CLIENT_CAPABILITY {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

// maxTaskAnswer bounds what a task's call may answer over HTTP.
const maxTaskAnswer = 64 << 20

// taskRecorder is the response writer of a task's call over HTTP: it
// reads mcp-go's answer as it comes, a JSON body or an event stream, and
// hands each message to the layer (progress as it happens).
type taskRecorder struct {
	l      *taskLayer
	task   string
	header http.Header
	status int
	buf    []byte
	seen   int64
	// answered: the call's answer came.
	answered bool
}

func (r *taskRecorder) Header() http.Header { return r.header }
func (r *taskRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *taskRecorder) Flush() {}

func (r *taskRecorder) statusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (r *taskRecorder) Write(p []byte) (int, error) {
	r.seen += int64(len(p))
	if r.seen > maxTaskAnswer {
		return 0, io.ErrShortWrite
	}
	r.buf = append(r.buf, p...)
	r.flushLines(false)
	return len(p), nil
}

// flushLines hands each whole line (at the end, the rest too) to the
// layer: an event's data line or a JSON body.
func (r *taskRecorder) flushLines(end bool) {
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			if end && len(r.buf) > 0 {
				r.line(r.buf)
				r.buf = nil
			}
			return
		}
		r.line(r.buf[:i])
		r.buf = r.buf[i+1:]
	}
}

func (r *taskRecorder) line(b []byte) {
	s := strings.TrimSpace(string(b))
	s = strings.TrimSpace(strings.TrimPrefix(s, "data:"))
	if strings.HasPrefix(s, "{") {
		if _, answer := r.l.fromMCP([]byte(s), r.task); answer {
			r.answered = true
		}
	}
}
