package mcpserver

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/tools"
)

func hasUpstream(o Options) bool { return o.Upstream != nil && len(o.Upstream.Servers()) > 0 }

// addUpstream offers the code's tool calls: run_code names the servers
// and their tool counts (again whenever a server's tools change) and
// search_tools describes them.
func addUpstream(s *server.MCPServer, deps tools.Deps, o Options) {
	if !hasUpstream(o) {
		return
	}
	deps.Upstream = o.Upstream
	if o.Metrics != nil {
		deps.ToolMetrics = o.Metrics
	}
	s.AddTools(tools.RunCode(deps), tools.SearchTools(o.Upstream))
	o.Upstream.OnToolsChanged(func() { s.AddTools(tools.RunCode(deps)) })
}
