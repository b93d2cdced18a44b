package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/egress"
	"github.com/runbox-mcp/runbox/manifest"
)

// approvalInput names the question about approve: ask endpoints among a
// call's input requests.
const approvalInput = "runbox_network_approval"

// approveSchema is the form the question shows.
var approveSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"allow": map[string]any{"type": "boolean", "title": "Allow",
			"description": "Let this run connect to these endpoints."},
	},
	"required": []string{"allow"},
}

// networkApproval settles the manifest's approve: ask endpoints before a
// run that may use them: the client's user is asked through MCP
// elicitation (a multi round-trip input request, which mcp-go turns into
// elicitation/create for clients of earlier protocol versions), once per
// call, naming the endpoints. It returns the run's approver, or the input
// request to answer first. A client that cannot elicit is not asked: the
// endpoints are refused with egress.ErrNoApprover.
func networkApproval(ctx context.Context, m *manifest.Manifest, req mcp.CallToolRequest) (egress.Approver, *mcp.CallToolResult) {
	var asks []string
	for _, e := range m.Network.Allow {
		if e.Approve == manifest.ApproveAsk {
			asks = append(asks, e.Host+":"+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(e.PortList())), ","), "[]"))
		}
	}
	if len(asks) == 0 {
		return nil, nil
	}
	if ans := server.ElicitationResponse(req.Params.InputResponses, approvalInput); ans != nil {
		content, _ := ans.Content.(map[string]any)
		if ans.Action == mcp.ElicitationResponseActionAccept && content["allow"] == true {
			return func(context.Context, string, int, string) error { return nil }, nil
		}
		why := fmt.Errorf("the user did not allow it (answer: %s)", ans.Action)
		return func(context.Context, string, int, string) error { return why }, nil
	}
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok || cs.GetClientCapabilities().Elicitation == nil {
		return nil, nil
	}
	return nil, server.NewInputRequestBuilder("").Elicit(approvalInput, mcp.ElicitationParams{
		Mode:            mcp.ElicitationModeForm,
		Message:         "The code this run_code call runs may connect to " + strings.Join(asks, ", ") + " (declared with approve: ask in runbox's manifest). Allow it for this run?",
		RequestedSchema: approveSchema,
	}).ToolResult()
}
