package mcpserver

import (
	"slices"
	"strings"
	"testing"

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
