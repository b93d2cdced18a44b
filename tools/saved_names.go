package tools

import (
	"fmt"
	"strings"
)

// A saved tool must never shadow, replace or delete a tool runbox itself
// serves, in this version or a later one. Two rules hold that:
//
//   - every tool the server has registered when saved tools are added (the
//     built-ins: run_code, search_tools, the session tools, save_tool,
//     delete_tool, and whatever a later version adds) is reserved by its
//     registration, not by a list kept here;
//   - runbox's own future tools are named with a reserved prefix, so that a
//     tool saved today cannot take their name tomorrow: see
//     ReservedToolPrefixes (a test holds every built-in to it).
//
// Names are compared by their key (toolKey): lower case, letters and digits
// only, so that no spelling a client may normalise to (Session-Open,
// session.open, sessionopen) reaches a reserved tool, nor another saved
// tool under a second spelling.

// ReservedToolPrefixes begin the names of runbox's own tools, present and
// future; a saved tool's name may not begin with one (compared by key,
// whatever the separators). "run" reserves only "run_..." as written,
// since its key would take every word that begins with run.
var ReservedToolPrefixes = []string{"runbox", "run_", "session"}

// legacyBuiltins are built-in names from before the prefix rule; no new
// built-in is named outside ReservedToolPrefixes.
var legacyBuiltins = []string{SearchToolsName, SaveToolName, DeleteToolName}

// toolKey is the spelling-free form of a tool name: lower-case letters
// and digits.
func toolKey(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// reservedName says why name may not be a saved tool's, or "" when it may:
// builtins are the names the server itself serves.
func reservedName(name string, builtins []string) string {
	k := toolKey(name)
	for _, b := range builtins {
		if toolKey(b) == k {
			return fmt.Sprintf("%q is runbox's own tool %s (in any spelling)", name, b)
		}
	}
	norm := strings.NewReplacer("-", "_", ".", "_", " ", "_").Replace(strings.ToLower(name))
	for _, p := range ReservedToolPrefixes {
		if strings.HasSuffix(p, "_") && strings.HasPrefix(norm, p) || !strings.HasSuffix(p, "_") && strings.HasPrefix(k, p) {
			return fmt.Sprintf("%q begins with %q, which runbox keeps for its own tools", name, p)
		}
	}
	return ""
}
