package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/tools"
)

// parkAbove is the body size from which a call's arguments are parked:
// below it mcp-go's copies cost little.
const parkAbove = 1 << 20

// parkedTools are the tools whose arguments may be parked: their
// handlers read the arguments as JSON (GetRawArguments), never as
// mcp-go's map, which a parked call leaves empty.
var parkedTools = []string{tools.RunCodeName}

// argumentParking keeps a large call's arguments out of mcp-go. mcp-go
// copies a tools/call's arguments three times over before a handler sees
// them (its params as JSON, the arguments as JSON twice, the arguments
// again as a map of Go values), so a call cost five times its body. For
// a call of a parked tool whose body is held (bodyLimit) and at least
// min bytes, mcp-go is handed the same body with the arguments' value
// cut to {}, and the request's context carries the arguments as a slice
// of the held body, not a copy; the tool handler middleware
// (parkedArguments) gives them back to the handler. Nothing of it is on
// the wire: the context is the request's own, so no client can name or
// reuse another request's arguments. Every other request passes as it
// came.
type argumentParking struct{ min int }

// parkedKey is the context key of a request's parked arguments.
type parkedKey struct{}

// parkedCall is what a request parked: the tool called and the
// arguments' JSON as the client sent them.
type parkedCall struct {
	tool string
	raw  json.RawMessage
}

// span is a JSON value as a slice of the input, not a copy.
type span []byte

func (s *span) UnmarshalJSON(b []byte) error {
	*s = b
	return nil
}

// http puts the parking in front of one of mcp-go's HTTP handlers: the
// streamable HTTP endpoint's, or the SSE transport's messages'.
func (p argumentParking) http(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := heldBytes(r)
		if r.Method != http.MethodPost || !ok || len(body) < p.min {
			next.ServeHTTP(w, r)
			return
		}
		call, stub, ok := park(body)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), parkedKey{}, call))
		holdBody(r, stub)
		next.ServeHTTP(w, r)
	})
}

// park returns msg's arguments and msg with their value cut to {}, when
// msg is a request (not a notification, nor a task's call) of a parked
// tool with arguments. Its fields are read as mcp-go reads them
// (encoding/json: names matched regardless of case, the last of a name
// taken), so the arguments parked are those mcp-go would have given the
// handler, and the cut message tells mcp-go everything else as msg did.
func park(msg []byte) (parkedCall, []byte, bool) {
	var req struct {
		ID     span   `json:"id"`
		Method string `json:"method"`
		Params span   `json:"params"`
	}
	if json.Unmarshal(msg, &req) != nil || req.Method != string(mcp.MethodToolsCall) ||
		len(req.ID) == 0 || string(req.ID) == "null" || len(req.Params) == 0 || req.Params[0] != '{' {
		return parkedCall{}, nil, false
	}
	var params struct {
		Name      string `json:"name"`
		Arguments span   `json:"arguments"`
		Task      span   `json:"task"`
	}
	if json.Unmarshal(req.Params, &params) != nil || !slices.Contains(parkedTools, params.Name) ||
		len(params.Task) > 0 || len(params.Arguments) == 0 || string(params.Arguments) == "null" {
		return parkedCall{}, nil, false
	}
	at, ok := offsetIn(msg, params.Arguments)
	if !ok {
		return parkedCall{}, nil, false
	}
	end := at + len(params.Arguments)
	stub := make([]byte, 0, len(msg)-len(params.Arguments)+2)
	stub = append(append(append(stub, msg[:at]...), "{}"...), msg[end:]...)
	return parkedCall{tool: params.Name, raw: json.RawMessage(params.Arguments)}, stub, true
}

// offsetIn returns where part, a slice of msg's array, starts in msg.
func offsetIn(msg, part []byte) (int, bool) {
	at := cap(msg) - cap(part)
	if len(part) == 0 || at < 0 || at+len(part) > len(msg) || &msg[at] != &part[0] {
		return 0, false
	}
	return at, true
}

// parkedArguments is the tool handler middleware that gives a handler
// the arguments its request parked, as JSON, both as mcp-go's raw
// arguments and as its arguments (which mcp-go's BindArguments reads as
// JSON). A request that parked none, or parked another tool's, passes as
// it came.
func parkedArguments(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if call, ok := ctx.Value(parkedKey{}).(parkedCall); ok && call.tool == req.Params.Name {
			req.Params.RawArguments, req.Params.Arguments = call.raw, call.raw
		}
		return next(ctx, req)
	}
}
