//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestInspectorCLI drives the built binary with the MCP Inspector's CLI
// mode (installed from npm by `make e2e`).
func TestInspectorCLI(t *testing.T) {
	inspect := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command("npx", append([]string{"--no-install", "mcp-inspector", "--cli", runboxBin, "serve"}, args...)...)
		cmd.Dir = "ts"
		out, err := cmd.Output()
		var v map[string]any
		if err != nil || json.Unmarshal(out, &v) != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, out)
		}
		return v
	}
	// A default server's tools: run_code, the run handle's, the session
	// tools and the sessions' checkpoints.
	var names []string
	for _, tl := range inspect("--method", "tools/list")["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "run_cancel,run_code,run_wait,session_checkpoint,session_close,session_fork,session_list,session_open,session_restore" {
		t.Fatalf("tools: %v", names)
	}
	// The manifest, and the view of a run for hosts that render MCP Apps.
	if r := inspect("--method", "resources/list")["resources"].([]any); len(r) != 2 || r[1].(map[string]any)["uri"] != "ui://runbox/run" {
		t.Fatalf("resources: %v", r)
	}
	// Each run's artifacts, the streams an answer cut and its displays;
	// a session's cells so far.
	var templates []string
	for _, r := range inspect("--method", "resources/templates/list")["resourceTemplates"].([]any) {
		templates = append(templates, r.(map[string]any)["uriTemplate"].(string))
	}
	slices.Sort(templates)
	if len(templates) != 4 || !slices.Contains(templates, "runbox://sessions/{session_id}/cells") ||
		!strings.HasPrefix(templates[0], "runbox://runs/") || !strings.HasPrefix(templates[2], "runbox://runs/") {
		t.Fatalf("resource templates: %v", templates)
	}
	if p := inspect("--method", "prompts/list")["prompts"].([]any); len(p) != 2 {
		t.Fatalf("prompts: %v", p)
	}
	res := inspect("--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "language=python", "--tool-arg", "code=print(6*7)")
	sc := res["structuredContent"].(map[string]any)
	if sc["status"] != "ok" || sc["stdout"] != "42\n" {
		t.Fatalf("tools/call: %v", res)
	}
}
