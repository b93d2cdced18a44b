package sandbox

import (
	"strings"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// esmHook adds runbox_tools' ES module resolver to a Node program that
// imports the library as an ES module (import ... from / import()):
// ES module resolution ignores NODE_PATH. Only such code pays for the
// hook's start-up; require('runbox_tools') needs none.
func esmHook(m *manifest.Manifest, lang manifest.Language, code string, env []string) []string {
	if len(m.Servers) == 0 || lang.ErrorFormat != "node" || !strings.Contains(code, "runbox_tools") || !strings.Contains(code, "import") {
		return env
	}
	hook := "--import=" + initproto.ToolsLib + "/register.mjs"
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NODE_OPTIONS="); ok {
			env[i] = "NODE_OPTIONS=" + strings.TrimSpace(v+" "+hook)
			return env
		}
	}
	return append(env, "NODE_OPTIONS="+hook)
}
