package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// Error kinds the code sees (ToolError.kind in the libraries).
const (
	KindUnknownServer = "unknown_server"
	KindUnknownTool   = "unknown_tool"
	KindDenied        = "denied"
	KindRefused       = "refused"
	KindLimit         = "limit"
	KindTimeout       = "timeout"
	KindUpstream      = "upstream"
	KindToolError     = "tool_error"
	KindBadRequest    = "bad_request"
)

// ErrNoElicitation is what an Asker returns when the client cannot be
// asked (it declared no elicitation).
var ErrNoElicitation = errors.New("the client cannot be asked (no elicitation)")

// Asker asks the user whether a call may go out; nil error means yes.
type Asker func(ctx context.Context, server, tool string, args map[string]any) error

// Record is one call, for the audit log and metrics.
type Record struct {
	Server, Tool string
	Args         json.RawMessage
	Duration     time.Duration
	// Outcome is ok or an error kind.
	Outcome  string
	BytesIn  int64 // arguments sent
	BytesOut int64 // result received
}

// Run serves one run's tool calls: the policy, the run's bounds, the
// audit. It is the initproto.StreamHandler of initproto.StreamTool.
type Run struct {
	set     *Set
	limits  manifest.ToolCalls
	ask     Asker
	observe func(Record)

	calls atomic.Int64
	bytes atomic.Int64
	// spent is the time the run's calls took, in nanoseconds.
	spent atomic.Int64
}

// NewRun prepares a run's calls; ask may be nil (ask tools are refused),
// observe may be nil.
func (s *Set) NewRun(limits manifest.ToolCalls, ask Asker, observe func(Record)) *Run {
	return &Run{set: s, limits: limits, ask: ask, observe: observe}
}

// Streams are the run's handlers of the streams its box opens.
func (r *Run) Streams() *initproto.Streams {
	return &initproto.Streams{Handlers: map[string]initproto.StreamHandler{initproto.StreamTool: r},
		MaxBytes: 2*int64(r.limits.MaxBytes) + 1<<20,
		// runbox-init sends no more than the run's calls may: a call past
		// it is refused in the box, only a note of it reaching the server.
		Budgets: map[string]int64{initproto.StreamTool: int64(r.limits.MaxBytes)}}
}

// refusal is the header data runbox-init sends, instead of the request,
// for a call it refused in the box as too large: the request's size; the
// blob is the request's op, server and tool only.
type refusal struct {
	RefusedBytes int64 `json:"refused_bytes"`
}

// Calls is how many calls the run made.
func (r *Run) Calls() int64 { return r.calls.Load() }

// request is what the in-box library sends.
type request struct {
	Op     string         `json:"op"`
	Server string         `json:"server"`
	Tool   string         `json:"tool"`
	Args   map[string]any `json:"args"`
	// Language is what the typings op declares.
	Language string `json:"language,omitempty"`
}

// answer is what it reads back.
type answer struct {
	OK         bool           `json:"ok"`
	Structured any            `json:"structured,omitempty"`
	Content    []contentItem  `json:"content,omitempty"`
	Servers    []CatalogEntry `json:"servers,omitempty"`
	// Text is the typings op's declarations.
	Text  string     `json:"text,omitempty"`
	Error *callError `json:"error,omitempty"`
}

type contentItem struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"` // base64
	MimeType string `json:"mime_type,omitempty"`
	URI      string `json:"uri,omitempty"`
}

type callError struct {
	Kind    string `json:"kind"`
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Message string `json:"message"`
}

// ServeStream answers one request of the code.
func (r *Run) ServeStream(ctx context.Context, s *initproto.BoxStream) {
	var a answer
	var req request
	var note refusal
	if len(s.Header.Data) > 0 {
		_ = json.Unmarshal(s.Header.Data, &note)
	}
	if len(s.Blobs) != 1 || json.Unmarshal(s.Blobs[0], &req) != nil {
		a = fail(KindBadRequest, "", "", "a malformed request")
	} else if note.RefusedBytes > 0 {
		a = r.tooLarge(req.Server, req.Tool, note.RefusedBytes)
	} else if req.Op == "list" {
		a = answer{OK: true, Servers: r.set.Catalog(ctx)}
	} else if req.Op == "typings" {
		a = r.typings(ctx, req.Language)
	} else {
		a = r.call(ctx, req, int64(len(s.Blobs[0])))
	}
	out, err := json.Marshal(a)
	if err != nil {
		out, _ = json.Marshal(fail(KindUpstream, req.Server, req.Tool, "the result cannot be encoded: "+err.Error()))
	}
	_ = initproto.Send(s, struct{}{}, out)
}

// typings answers the typings op: the declarations of the tools the
// code may call, from the servers' current lists, as list sees them.
func (r *Run) typings(ctx context.Context, language string) answer {
	text, err := Typings(r.set.Catalog(ctx), language)
	if err != nil {
		return fail(KindBadRequest, "", "", err.Error())
	}
	return answer{OK: true, Text: text}
}

// RefuseStream answers a request the server would not read, past what
// the run's streams may still carry (runbox-init refuses such calls
// itself: only a box that does not keep to its budget gets here).
func (r *Run) RefuseStream(_ context.Context, s *initproto.BoxStream) {
	out, _ := json.Marshal(r.tooLarge("", "", 0))
	_ = initproto.Send(s, struct{}{}, out)
}

// tooLarge is the limit error of a call whose arguments (size bytes, 0:
// unknown) pass what the run's calls may send; recorded as any call.
func (r *Run) tooLarge(server, tool string, size int64) answer {
	if srv := r.set.Server(server); srv != nil {
		server = srv.Name()
	}
	msg := fmt.Sprintf("the call's arguments pass what this run's tool calls may still send (tool_calls.max_bytes %s, arguments and results together)", r.limits.MaxBytes)
	if size > 0 {
		msg = fmt.Sprintf("the call's %d bytes of arguments pass what this run's tool calls may still send (tool_calls.max_bytes %s, arguments and results together)", size, r.limits.MaxBytes)
	}
	if r.observe != nil {
		r.observe(Record{Server: cut(server), Tool: cut(tool), Args: json.RawMessage(`"(too large, not read)"`), Outcome: KindLimit, BytesIn: size})
	}
	return fail(KindLimit, server, tool, msg)
}

// maxRecordName bounds a server or tool name in a record: code names
// what it likes, and an unknown name is recorded as sent.
const maxRecordName = 256

// cut is name cut to maxRecordName bytes, on a rune boundary.
func cut(name string) string {
	if len(name) <= maxRecordName {
		return name
	}
	return strings.ToValidUTF8(name[:maxRecordName], "") + "…"
}

func fail(kind, server, tool, msg string) answer {
	return answer{Error: &callError{Kind: kind, Server: server, Tool: tool, Message: msg}}
}

// call makes one call, or says why not.
func (r *Run) call(ctx context.Context, req request, in int64) (a answer) {
	start := time.Now()
	var out int64
	defer func() {
		if r.observe == nil {
			return
		}
		outcome := "ok"
		if a.Error != nil {
			outcome = a.Error.Kind
		}
		args, _ := json.Marshal(req.Args)
		r.observe(Record{Server: cut(req.Server), Tool: cut(req.Tool), Args: args, Duration: time.Since(start), Outcome: outcome, BytesIn: in, BytesOut: out})
	}()
	srv := r.set.Server(req.Server)
	if srv == nil {
		return fail(KindUnknownServer, req.Server, req.Tool, fmt.Sprintf("no server %q is configured", req.Server))
	}
	req.Server = srv.Name()
	if n := r.calls.Add(1); n > int64(r.limits.MaxCalls) {
		return fail(KindLimit, req.Server, req.Tool, fmt.Sprintf("this run made more than the %d tool calls a run may", r.limits.MaxCalls))
	}
	if r.bytes.Add(in) > int64(r.limits.MaxBytes) {
		// Never sent upstream: the refused call spends nothing.
		r.bytes.Add(-in)
		return fail(KindLimit, req.Server, req.Tool, fmt.Sprintf("this run's tool calls passed the %s they may send and receive", r.limits.MaxBytes))
	}
	timeout := r.limits.CallTimeout()
	if r.limits.MaxSeconds > 0 {
		left := time.Duration(r.limits.MaxSeconds*float64(time.Second)) - time.Duration(r.spent.Load())
		if left <= 0 {
			return fail(KindLimit, req.Server, req.Tool, fmt.Sprintf("this run's tool calls took the %gs they may take together", r.limits.MaxSeconds))
		}
		timeout = min(timeout, left)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func(t0 time.Time) { r.spent.Add(int64(time.Since(t0))) }(time.Now())
	tools, err := srv.Tools(cctx)
	if err != nil {
		return fail(KindUpstream, req.Server, req.Tool, "the server is not reachable: "+err.Error())
	}
	tool, ok := findTool(tools, req.Tool)
	if !ok {
		return fail(KindUnknownTool, req.Server, req.Tool, fmt.Sprintf("server %q has no tool %q", req.Server, req.Tool))
	}
	req.Tool = tool.Name
	switch policy(srv.Config(), tool.Name) {
	case manifest.PolicyDeny:
		return fail(KindDenied, req.Server, req.Tool, "the manifest denies this tool")
	case manifest.PolicyAsk:
		if r.ask == nil {
			return fail(KindRefused, req.Server, req.Tool, "this tool needs the user's approval and there is no one to ask")
		}
		if err := r.ask(cctx, req.Server, req.Tool, req.Args); err != nil {
			return fail(KindRefused, req.Server, req.Tool, "not approved: "+err.Error())
		}
	}
	if req.Args == nil {
		req.Args = map[string]any{}
	}
	res, err := srv.Call(cctx, req.Tool, req.Args)
	switch {
	case err != nil && cctx.Err() != nil && ctx.Err() == nil:
		return fail(KindTimeout, req.Server, req.Tool, fmt.Sprintf("the call took longer than %s and was cancelled", timeout))
	case err != nil:
		return fail(KindUpstream, req.Server, req.Tool, err.Error())
	}
	a = convert(res)
	raw, _ := json.Marshal(a)
	out = int64(len(raw))
	if r.bytes.Add(out) > int64(r.limits.MaxBytes) {
		return fail(KindLimit, req.Server, req.Tool, fmt.Sprintf("this run's tool calls passed the %s they may send and receive", r.limits.MaxBytes))
	}
	if res.IsError {
		msg := textOf(a.Content)
		if msg == "" {
			msg = "the tool reported an error"
		}
		return fail(KindToolError, req.Server, req.Tool, msg)
	}
	return a
}

// policy is the manifest's word on a tool under every name a call may
// arrive by: the server's own (get-env) and the identifier code calls it
// by (get_env). A glob that matches either spelling applies, so deny and
// ask never miss a call that allow would let through.
func policy(s manifest.Server, name string) string {
	names := []string{name}
	if id := Identifier(name); id != name {
		names = append(names, id)
	}
	match := func(globs []string) bool {
		for _, g := range globs {
			for _, n := range names {
				if ok, _ := path.Match(g, n); ok {
					return true
				}
			}
		}
		return false
	}
	switch {
	case match(s.Deny):
		return manifest.PolicyDeny
	case match(s.Ask):
		return manifest.PolicyAsk
	case len(s.Allow) > 0 && !match(s.Allow):
		return manifest.PolicyDeny
	}
	return manifest.PolicyAllow
}

// convert turns a tool's result into what the library reads.
func convert(res *mcp.CallToolResult) answer {
	a := answer{OK: true, Structured: res.StructuredContent}
	for _, c := range res.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			a.Content = append(a.Content, contentItem{Type: "text", Text: c.Text})
		case mcp.ImageContent:
			a.Content = append(a.Content, contentItem{Type: "image", Data: c.Data, MimeType: c.MIMEType})
		case mcp.AudioContent:
			a.Content = append(a.Content, contentItem{Type: "audio", Data: c.Data, MimeType: c.MIMEType})
		case mcp.EmbeddedResource:
			switch rc := c.Resource.(type) {
			case mcp.TextResourceContents:
				a.Content = append(a.Content, contentItem{Type: "text", Text: rc.Text, URI: rc.URI, MimeType: rc.MIMEType})
			case mcp.BlobResourceContents:
				a.Content = append(a.Content, contentItem{Type: "blob", Data: rc.Blob, URI: rc.URI, MimeType: rc.MIMEType})
			}
		case mcp.ResourceLink:
			a.Content = append(a.Content, contentItem{Type: "link", URI: c.URI, MimeType: c.MIMEType, Text: c.Name})
		}
	}
	return a
}

func textOf(items []contentItem) string {
	s := ""
	for _, c := range items {
		if c.Type == "text" {
			if s != "" {
				s += "\n"
			}
			s += c.Text
		}
	}
	return s
}
