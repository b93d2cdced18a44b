package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/tools"
)

// sse puts the layer in front of the deprecated SSE transport's message
// endpoint: a client POSTs each message with its session's id and reads
// every answer on its event stream. The layer answers tasks/* and a
// task-augmented call's CreateTaskResult on that stream
// (SendEventToSession), and makes the task's call as a message of the
// same session, whose own answer and progress the stream's filter
// (sseEvents) keeps back for the task. The bearer token's name owns the
// tasks, as on streamable HTTP.
func (l *taskLayer) sse(srv *server.SSEServer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session := r.URL.Query().Get("sessionId")
		if r.Method != http.MethodPost || r.Body == nil || session == "" {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readTaskBody(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		req, p, ok := l.classify(body)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		owner := tools.PrincipalOf(r.Context())
		reply := func(resp []byte) {
			if err := srv.SendEventToSession(session, json.RawMessage(resp)); err != nil {
				writeRPC(w, mcp.INVALID_PARAMS, rpcError(req.ID, mcp.INVALID_PARAMS, "SSE session: "+err.Error(), nil))
				return
			}
			w.WriteHeader(http.StatusAccepted)
		}
		if req.Method != string(mcp.MethodToolsCall) {
			resp, _ := l.answer(owner, req, p)
			reply(resp)
			return
		}
		// Each time the call is made, it is a message of this session,
		// posted to mcp-go as the client's own were.
		orig := r.Clone(r.Context())
		post := func(b []byte) error {
			ir := orig.Clone(orig.Context())
			holdBody(ir, b)
			rec := &postedAnswer{header: http.Header{}}
			next.ServeHTTP(rec, ir)
			if rec.status >= 300 {
				return errTaskCall
			}
			return nil
		}
		send := func(id string, inner []byte) (context.CancelFunc, error) { return l.sendInConnection(id, inner, post) }
		t := l.start(owner, p.Name, body, send)
		if t == nil {
			next.ServeHTTP(w, r)
			return
		}
		reply(createdAnswer(req.ID, *t))
	})
}

// postedAnswer is the response of a message the layer posts itself: its
// status only (the answer comes on the session's stream).
type postedAnswer struct {
	header http.Header
	status int
}

func (d *postedAnswer) Header() http.Header { return d.header }
func (d *postedAnswer) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}
func (d *postedAnswer) Write(p []byte) (int, error) { return len(p), nil }

// sseEvents wraps the SSE stream's handler: each event mcp-go writes
// (one Write each) about a task's call goes to the task, not the client.
func (l *taskLayer) sseEvents(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(eventFilter{ResponseWriter: w, Flusher: f, l: l}, r)
	})
}

type eventFilter struct {
	http.ResponseWriter
	http.Flusher
	l *taskLayer
}

func (f eventFilter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(taskIDPrefix)) {
		for _, line := range strings.Split(string(p), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok {
				if ours, _ := f.l.fromMCP([]byte(strings.TrimSpace(data)), ""); ours {
					return len(p), nil
				}
			}
		}
	}
	return f.ResponseWriter.Write(p)
}
