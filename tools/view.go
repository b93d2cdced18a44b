package tools

import (
	"context"
	"maps"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/view"
)

// viewTools are the tools whose results the view draws: a run, a long
// run's outcome, and a session's life.
var viewTools = map[string]bool{
	RunCodeName: true, RunWaitName: true,
	SessionOpenName: true, SessionCloseName: true, SessionListName: true,
}

// ViewForClient is the server's tool filter for MCP Apps: a client that
// declares the extension (with the view's MIME type, or none named) sees
// the run-drawing tools point to the view; any other client sees the tools
// exactly as before.
func ViewForClient(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if !declaresView(ctx) {
		return tools
	}
	out := make([]mcp.Tool, len(tools))
	for i, t := range tools {
		if viewTools[t.Name] {
			t = withView(t)
		}
		out[i] = t
	}
	return out
}

// withView returns t with _meta.ui.resourceUri set, on a copy of its meta
// so that the registered tool, which other clients list, is unchanged.
func withView(t mcp.Tool) mcp.Tool {
	meta := &mcp.Meta{AdditionalFields: map[string]any{}}
	if t.Meta != nil {
		*meta = *t.Meta
		meta.AdditionalFields = maps.Clone(t.Meta.AdditionalFields)
		if meta.AdditionalFields == nil {
			meta.AdditionalFields = map[string]any{}
		}
	}
	meta.AdditionalFields["ui"] = map[string]any{"resourceUri": view.URI}
	t.Meta = meta
	return t
}

// declaresView reads the calling client's capabilities: per request on
// the stateless protocol, else those its session declared at initialize.
func declaresView(ctx context.Context) bool {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientCapabilities != nil {
		return viewCapable(*info.ClientCapabilities)
	}
	if cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return viewCapable(cs.GetClientCapabilities())
	}
	return false
}

// viewCapable reports whether capabilities declare the extension in a
// form the view can use: an object, whose mimeTypes, when listed, include
// the view's.
func viewCapable(c mcp.ClientCapabilities) bool {
	ext, ok := c.Extensions[view.Extension].(map[string]any)
	if !ok {
		return false
	}
	types, listed := ext["mimeTypes"].([]any)
	if !listed {
		return ext["mimeTypes"] == nil
	}
	for _, m := range types {
		if m == view.MIMEType {
			return true
		}
	}
	return false
}

// ViewResource serves the view: one HTML page, the same for every caller.
func ViewResource() server.ServerResource {
	res := mcp.NewResource(view.URI, "runbox run view",
		mcp.WithResourceDescription("The view of a run for hosts that render MCP Apps: status, typed error on its line, output, displays, tables, artifacts, metrics, a session's cells."),
		mcp.WithMIMEType(view.MIMEType))
	res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"ui": view.ResourceMeta()}}
	return server.ServerResource{Resource: res, Handler: func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{
			URI: view.URI, MIMEType: view.MIMEType, Text: view.HTML(),
			Meta: map[string]any{"ui": view.ResourceMeta()},
		}}, nil
	}}
}
