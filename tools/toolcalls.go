package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/upstream"
	"github.com/runbox-mcp/runbox/upstream/typings"
)

// Elicit asks the user of the calling client, by MCP elicitation, whether
// a call may go out, showing its arguments. ctx is the run_code call's (the
// run's handlers inherit it). A client that declared no elicitation
// cannot be asked: upstream.ErrNoElicitation.
func Elicit(ctx context.Context, srvName, tool string, args map[string]any) error {
	srv := server.ServerFromContext(ctx)
	cs := server.ClientSessionFromContext(ctx)
	if srv == nil || cs == nil {
		return upstream.ErrNoElicitation
	}
	if ci, ok := cs.(server.SessionWithClientInfo); !ok || ci.GetClientCapabilities().Elicitation == nil {
		return upstream.ErrNoElicitation
	}
	shown, _ := json.MarshalIndent(args, "", "  ")
	if len(shown) > 4000 {
		shown = append(shown[:4000], "…"...)
	}
	req := mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message:         fmt.Sprintf("Code running in runbox wants to call the tool %q of the server %q with these arguments:\n%s\nAllow this call?", tool, srvName, shown),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}}
	res, err := srv.RequestElicitation(ctx, req)
	switch {
	case errors.Is(err, server.ErrElicitationNotSupported) || errors.Is(err, server.ErrNoActiveSession):
		return upstream.ErrNoElicitation
	case err != nil:
		return fmt.Errorf("asking the user failed: %w", err)
	case res.Action != mcp.ElicitationResponseActionAccept:
		return fmt.Errorf("the user answered %s", res.Action)
	}
	return nil
}

// ServersParagraph is what the run_code description says of the servers:
// their names and tool counts only; search_tools tells the rest.
func ServersParagraph(set *upstream.Set) string {
	if set == nil || len(set.Servers()) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nTools of other MCP servers can be called from the code (the box still has no network): ")
	for i, s := range set.Summaries() {
		if i > 0 {
			b.WriteString(", ")
		}
		id := upstream.Identifier(s.Name)
		if s.Tools > 0 {
			fmt.Fprintf(&b, "%s (%d tools)", id, s.Tools)
		} else {
			b.WriteString(id)
		}
	}
	b.WriteString(". Python: `import runbox_tools as tools; r = tools.<server>.<tool>(a=1, b=2)` with keyword arguments, as typed as the tool's schema (help(tools.<server>) lists them, e.g. `tools.<server>.add(*, a: float, b: float) -> Any`); JavaScript and TypeScript: `const tools = require('runbox_tools'); const r = await tools.<server>.<tool>({a: 1, b: 2})` (TypeScript: `import tools from 'runbox_tools'` too; typed, e.g. `tools.<server>.add(args: { a: number; b: number }): Promise<unknown>`); also tools.call(server, tool, args). A call returns the tool's structured content or its text; a failure raises ToolError (kind, server, tool, message), kind bad_request before the call is sent when an argument is unknown, missing or of the wrong type. Call search_tools (language python or typescript) to find tools and their typed signatures. Keep intermediate results in the code and print only what you need.")
	return b.String()
}

// SearchToolsName is the search tool's name.
const SearchToolsName = "search_tools"

// SearchToolsArgs are search_tools' arguments.
type SearchToolsArgs struct {
	Query   string `json:"query,omitempty" jsonschema:"description=Words that must all appear in a tool's server, name or description; empty lists every tool."`
	Schemas bool   `json:"schemas,omitempty" jsonschema:"description=Also return each hit's full input and output schemas (ask for them once you know which tools you need)."`
	// Language is the language of each hit's signature; empty is Python.
	Language string `json:"language,omitempty"`
}

// searchLanguages are the languages search_tools writes signatures in.
var searchLanguages = []any{typings.Python, typings.TypeScriptLang, typings.JavaScript}

// SearchTools finds the upstream tools code can call.
func SearchTools(set *upstream.Set) server.ServerTool {
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"query":    map[string]any{"type": "string", "description": "Words that must all appear in a tool's server, name or description; empty lists every tool."},
			"schemas":  map[string]any{"type": "boolean", "description": "Also return each hit's full input and output schemas (ask once you know which tools you need)."},
			"language": map[string]any{"type": "string", "enum": searchLanguages, "description": "The language of each hit's signature (the call with its argument and result types): python (the default), typescript or javascript."},
		},
		"additionalProperties": false,
	})
	tool := mcp.NewToolWithRawSchema(SearchToolsName, "Find the tools of the MCP servers that code in run_code can call (tools.<server>.<tool>): names, typed signatures in the language asked for and one-line descriptions for a query, full schemas on demand.", schema)
	tool.Icons = Icons
	tool.Annotations = mcp.ToolAnnotation{Title: "Search the tools code can call", ReadOnlyHint: mcp.ToBoolPtr(true),
		DestructiveHint: mcp.ToBoolPtr(false), IdempotentHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args SearchToolsArgs
		if err := json.Unmarshal(objectArguments(req), &args); err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
		}
		if args.Language != "" && !slices.Contains(searchLanguages, any(args.Language)) {
			return mcp.NewToolResultError(fmt.Sprintf("invalid arguments: language %q is not python, typescript or javascript", args.Language)), nil
		}
		hits := set.Search(ctx, args.Query, args.Schemas, args.Language)
		if hits == nil {
			hits = []upstream.Match{}
		}
		return structured(map[string]any{"tools": hits}), nil
	}}
}
