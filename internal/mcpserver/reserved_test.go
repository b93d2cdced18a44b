package mcpserver

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/tools"
)

// Every tool runbox serves itself is named with a reserved prefix (or is
// one of the few named before the rule), so that no tool saved today can
// take the name of one a later version adds: a new built-in outside the
// prefixes fails here.
func TestEveryBuiltinHasAReservedName(t *testing.T) {
	m := manifest.Default()
	m.SavedTools.Enabled, m.SavedTools.Dir = true, t.TempDir()
	m.Sessions.Enabled = true
	c, _ := inProcess(t, m, &echoRunner{})
	legacy := []string{tools.SearchToolsName, tools.SaveToolName, tools.DeleteToolName}
	for _, name := range toolNames(t, c) {
		if slices.Contains(legacy, name) {
			continue
		}
		if !slices.ContainsFunc(tools.ReservedToolPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			t.Errorf("built-in %q begins with none of %v: name it so, or a saved tool may take its name", name, tools.ReservedToolPrefixes)
		}
	}
}

// A client saving in a loop fills neither every client's tool list nor
// the disk: past 256 tools a new name is refused (a new version of a kept
// one is not).
func TestSavedToolsAreBounded(t *testing.T) {
	m := manifest.Default()
	m.SavedTools.Enabled, m.SavedTools.Dir = true, t.TempDir()
	c, _ := inProcess(t, m, &echoRunner{})
	save := func(name string) *mcp.CallToolResult {
		return call(t, c, "save_tool", map[string]any{"name": name, "description": "d", "language": "python", "code": "print(1)"})
	}
	for i := range 256 {
		if res := save(fmt.Sprintf("tool_%d", i)); res.IsError {
			t.Fatalf("tool %d: %+v", i, res.Content)
		}
	}
	if res := save("tool_256"); !res.IsError {
		t.Fatal("a 257th tool was saved")
	}
	if res := save("tool_0"); res.IsError {
		t.Fatalf("a new version of a kept tool: %+v", res.Content)
	}
	if n := len(toolNames(t, c)); n > 256+8 {
		t.Fatalf("%d tools served", n)
	}
}
