//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestSavedTools: code saved as a tool (one that calls an upstream server)
// is announced with tools/list_changed, runs in a fresh box with the
// call's arguments, survives a restart and is deleted.
func TestSavedTools(t *testing.T) {
	manifest := toolServers(t, t.TempDir())
	manifest = manifest[:strings.Index(manifest, "  - name: memory")] + "saved_tools:\n  enabled: true\n  dir: " + t.TempDir() + "\n"
	callTool := func(s *server, name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := s.c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	stdout := func(res *mcp.CallToolResult) string {
		var r struct{ Stdout string }
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &r)
		return r.Stdout
	}

	s := dockerServer(t, manifest)
	changed := make(chan struct{}, 4)
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	res := callTool(s, "save_tool", map[string]any{"name": "sum_upstream", "description": "Adds a and b with the everything server.", "language": "python",
		"code":         "import json, sys\nimport runbox_tools as tools\na = json.load(sys.stdin)\nprint(tools.everything.get_sum(a=a['a'], b=a['b']))\n",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}, "required": []string{"a", "b"}}})
	if res.IsError {
		t.Fatalf("save_tool: %+v", res.Content)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after save_tool")
	}
	if out := stdout(callTool(s, "sum_upstream", map[string]any{"a": 40, "b": 2})); !strings.Contains(out, "42") {
		t.Fatalf("the saved tool answered %q", out)
	}
	s.close()

	s = dockerServer(t, manifest)
	tools, err := s.c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tools.Tools {
		found = found || tl.Name == "sum_upstream"
	}
	if !found {
		t.Fatal("the saved tool did not survive a restart")
	}
	if out := stdout(callTool(s, "sum_upstream", map[string]any{"a": 1, "b": 2})); !strings.Contains(out, "3") {
		t.Fatalf("after a restart the saved tool answered %q", out)
	}
	if res := callTool(s, "delete_tool", map[string]any{"name": "sum_upstream"}); res.IsError {
		t.Fatalf("delete_tool: %+v", res.Content)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "sum_upstream", map[string]any{"a": 1, "b": 2}
	if res, err := s.c.CallTool(context.Background(), req); err == nil && !res.IsError {
		t.Fatal("a deleted tool still answers")
	}
}
