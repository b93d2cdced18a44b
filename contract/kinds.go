package contract

import (
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/runbox-mcp/runbox/manifest"
)

// Kinds lists every error kind, in the order the contract names them: the
// one list the output schema's enum, the tool description and the prompts'
// advice are made from.
var Kinds = []Kind{KindSyntax, KindRuntime, KindTimeout, KindOOM, KindForbiddenSyscall,
	KindResourceLimit, KindOutputLimit, KindInvalidRequest, KindSandbox, KindForbiddenNetwork, KindSessionLost, KindSessionNotFound,
	KindWorkspaceBusy, KindCheckpointNotFound, KindCheckpointInvalid}

// JSONSchema publishes a kind as the string enum of [Kinds].
func (Kind) JSONSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, k := range Kinds {
		s.Enum = append(s.Enum, string(k))
	}
	return s
}

// KindsFor are the kinds a run under m can fail with: every kind but
// forbidden_network when m declares no network, workspace_busy, which
// only session_open and workspace_delete answer, and the checkpoint tools'
// own.
func KindsFor(m *manifest.Manifest) []Kind {
	var out []Kind
	for _, k := range Kinds {
		if k == KindForbiddenNetwork && !m.Network.Enabled() || k == KindWorkspaceBusy || k == KindCheckpointNotFound || k == KindCheckpointInvalid {
			continue
		}
		out = append(out, k)
	}
	return out
}

// ToolDescription is run_code's description: the sandbox and its rules
// as the manifest declares them, then the error kinds an agent may meet.
func ToolDescription(m *manifest.Manifest) string {
	names := make([]string, 0, len(Kinds))
	for _, k := range KindsFor(m) {
		names = append(names, string(k))
	}
	return m.Describe() + "\nOn failure, error.kind says what happened (" + strings.Join(names, ", ") + "), error.line points into your code, and error.hint says what to change."
}
