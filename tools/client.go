package tools

import (
	"context"

	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
)

// ClientOf says who is calling, from the MCP session in ctx.
func ClientOf(ctx context.Context) audit.Client {
	var c audit.Client
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return c
	}
	c.Session = cs.SessionID()
	if ci, ok := cs.(server.SessionWithClientInfo); ok {
		info := ci.GetClientInfo()
		c.Name, c.Version = info.Name, info.Version
	}
	return c
}
