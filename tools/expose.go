package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/expose"
)

// Exposure tools' names.
const (
	SessionExposeName    = "session_expose"
	SessionExposuresName = "session_exposures"
	SessionUnexposeName  = "session_unexpose"
)

// SessionExposeArgs are session_expose's arguments.
type SessionExposeArgs struct {
	SessionID string `json:"session_id" jsonschema:"required,description=The id session_open returned."`
	Port      int    `json:"port" jsonschema:"required,minimum=1,maximum=65535,description=The port a server in the session's box listens on (on 127.0.0.1 or 0.0.0.0 inside the box)."`
	Name      string `json:"name,omitempty" jsonschema:"maxLength=64" jsonschema_description:"A label for the person, e.g. dashboard."`
}

// SessionExposuresArgs are session_exposures' arguments.
type SessionExposuresArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"description=Only this session's exposures; empty: all of yours."`
}

// SessionUnexposeArgs are session_unexpose's arguments.
type SessionUnexposeArgs struct {
	ExposureID string `json:"exposure_id" jsonschema:"required,description=The id session_expose returned."`
}

// ExposeResult is the structured answer of the exposure tools.
type ExposeResult struct {
	Status    contract.Status     `json:"status" jsonschema:"enum=ok,enum=error"`
	Exposure  *expose.Info        `json:"exposure,omitempty" jsonschema:"description=The exposure opened."`
	Exposures []expose.Info       `json:"exposures,omitempty" jsonschema:"description=The caller's open exposures."`
	Closed    bool                `json:"closed,omitempty"`
	Error     *contract.ErrorInfo `json:"error,omitempty"`
}

func exposeAnswer(res ExposeResult) *mcp.CallToolResult {
	res.Status = statusOf(res.Error)
	var text string
	switch {
	case res.Error != nil:
		text = errorText(res.Error)
	case res.Exposure != nil:
		text = fmt.Sprintf("The session's port %d is open to the person at %s (exposure %s). Give them this URL: it carries the preview's token; "+
			"it works on this machine while the session lives, until session_unexpose.", res.Exposure.BoxPort, res.Exposure.URL, res.Exposure.ID)
	case res.Closed:
		text = "exposure closed"
	default:
		text = fmt.Sprintf("%d open exposures", len(res.Exposures))
		for _, e := range res.Exposures {
			text += fmt.Sprintf("\n%s · session %s · box port %d · %s · %d connections open", e.ID, e.SessionID, e.BoxPort, e.URL, e.Connections)
		}
	}
	return textAnswer(res, res.Error, text)
}

// exposeFail is err as the tools' typed error.
func exposeFail(err error) *contract.ErrorInfo {
	switch {
	case errors.Is(err, expose.ErrNoSession):
		return ptrInfo(contract.NoSession())
	case errors.Is(err, expose.ErrNotFound):
		return &contract.ErrorInfo{Kind: contract.KindInvalidRequest, Message: err.Error(),
			Hint: "Use an exposure_id that session_expose returned and session_exposures still shows."}
	}
	return invalid("%v", err)
}

func ptrInfo(e contract.ErrorInfo) *contract.ErrorInfo { return &e }

func exposeTool(name, title, desc string, args any, readOnly, destructive bool) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, mustJSON(reflectSchema(args)))
	t.Icons = Icons
	t.RawOutputSchema = mustJSON(reflectSchema(&ExposeResult{}))
	t.Annotations = mcp.ToolAnnotation{Title: title, ReadOnlyHint: mcp.ToBoolPtr(readOnly), DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint: mcp.ToBoolPtr(readOnly), OpenWorldHint: mcp.ToBoolPtr(false)}
	return t
}

// ExposeTools are session_expose, session_exposures and session_unexpose,
// when the manifest enables exposures (set is nil otherwise).
func ExposeTools(set *expose.Set) []server.ServerTool {
	if !set.Enabled() {
		return nil
	}
	exp := exposeTool(SessionExposeName, "Open a session's web server to the person",
		"Give the person a URL that opens a web server your session started (e.g. python3 -m http.server 8000 in the background, a Flask or Node app, a dev server): "+
			"runbox listens on their machine and carries each connection into the session's box to that port. HTTP, WebSockets and server-sent events work. "+
			"Start the server first, listening on the box's 127.0.0.1 or 0.0.0.0, in the background so the call returns "+
			"(Python: a thread or subprocess.Popen; JavaScript: call server.unref() so the cell can end; bash: cmd &). "+
			"The URL carries a token: only whoever has it gets in. It closes with the session or with session_unexpose.",
		&SessionExposeArgs{}, false, false)
	list := exposeTool(SessionExposuresName, "List my session exposures", "List your open exposures (session_expose): id, session, box port, URL and connections open.", &SessionExposuresArgs{}, true, false)
	unexp := exposeTool(SessionUnexposeName, "Close a session exposure", "Close an exposure session_expose opened: its URL stops working and its connections end; the session lives on.", &SessionUnexposeArgs{}, false, true)
	return []server.ServerTool{
		{Tool: exp, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SessionExposeArgs
			if err := decodeStrict(req, &a); err != nil {
				return exposeAnswer(ExposeResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			info, err := set.Expose(ctx, a.SessionID, PrincipalOf(ctx), a.Port, a.Name)
			if err != nil {
				return exposeAnswer(ExposeResult{Error: exposeFail(err)}), nil
			}
			return exposeAnswer(ExposeResult{Exposure: &info}), nil
		}},
		{Tool: list, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SessionExposuresArgs
			if err := decodeStrict(req, &a); err != nil {
				return exposeAnswer(ExposeResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			return exposeAnswer(ExposeResult{Exposures: set.List(PrincipalOf(ctx), a.SessionID)}), nil
		}},
		{Tool: unexp, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SessionUnexposeArgs
			if err := decodeStrict(req, &a); err != nil {
				return exposeAnswer(ExposeResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			if err := set.Close(PrincipalOf(ctx), a.ExposureID); err != nil {
				return exposeAnswer(ExposeResult{Error: exposeFail(err)}), nil
			}
			return exposeAnswer(ExposeResult{Closed: true}), nil
		}},
	}
}
