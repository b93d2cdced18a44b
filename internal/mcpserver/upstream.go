package mcpserver

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/tools"
)

// upstreamOptions: a tool under an ask policy is approved by an MCP
// elicitation sent while run_code runs. Protocol 2026-07-28 replaced such
// server-initiated requests with multi round-trip results, which cannot
// pause a running box; the legacy requests still work on stdio and on
// stateful streamable HTTP, and a client that declared no elicitation is
// never asked (the code sees a refusal).
func upstreamOptions(o Options) []server.ServerOption {
	if !hasUpstream(o) {
		return nil
	}
	return []server.ServerOption{server.WithLegacyServerInitiatedRequests()}
}

func hasUpstream(o Options) bool { return o.Upstream != nil && len(o.Upstream.Servers()) > 0 }

// addSaved offers save_tool, delete_tool and the tools saved before.
func addSaved(s *server.MCPServer, m *manifest.Manifest, deps tools.Deps, o Options) {
	if !m.SavedTools.Enabled {
		return
	}
	if hasUpstream(o) {
		deps.Upstream = o.Upstream
		if o.Metrics != nil {
			deps.ToolMetrics = o.Metrics
		}
	}
	store, err := tools.NewSavedStore(m.SavedTools)
	if err == nil {
		var all []server.ServerTool
		if all, err = tools.SavedTools(s, store, deps); err == nil {
			s.AddTools(all...)
			return
		}
	}
	if o.Logger != nil {
		o.Logger.Warn("saved tools are not available", "err", err)
	}
}
