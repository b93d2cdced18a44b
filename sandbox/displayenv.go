package sandbox

import (
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// displayEnv lets the program display things (display(), matplotlib's
// show(), console.table): Python finds runbox-init's display library's
// sitecustomize on its path, Node preloads its display library.
func displayEnv(lang manifest.Language, env map[string]string) {
	switch lang.ErrorFormat {
	case "python":
		if p := env["PYTHONPATH"]; p != "" {
			env["PYTHONPATH"] = initproto.DisplayLib + ":" + p
		} else {
			env["PYTHONPATH"] = initproto.DisplayLib
		}
	case "node", "typescript":
		pre := "--require=" + initproto.DisplayLib + "/runbox_display.js"
		if o := env["NODE_OPTIONS"]; o != "" {
			env["NODE_OPTIONS"] = o + " " + pre
		} else {
			env["NODE_OPTIONS"] = pre
		}
	}
}
