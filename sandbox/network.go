package sandbox

import (
	"github.com/runbox-mcp/runbox/egress"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// networkEnv adds, when the manifest declares endpoints, what makes the
// program's clients use runbox-init's proxy: the proxy variables, and for
// Node a module that routes fetch through it. Every language gets it, so a
// bash script's node or a Python subprocess's curl use it too.
func networkEnv(m *manifest.Manifest, env map[string]string) {
	if !m.Network.Enabled() {
		return
	}
	for k, v := range egress.BoxEnv(initproto.ProxyAddr) {
		env[k] = v
	}
	if opts := env["NODE_OPTIONS"]; opts != "" {
		env["NODE_OPTIONS"] = opts + " " + egress.NodeOptions()
	} else {
		env["NODE_OPTIONS"] = egress.NodeOptions()
	}
}
