package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

func TestContentOnlyClients(t *testing.T) {
	for name, want := range map[string]bool{"codex-mcp-client": true, "Codex": true, "claude-code": false, "gemini-cli-mcp-client": false, "": false, "opencode": false} {
		if got := isContentOnly(name); got != want {
			t.Errorf("%q: %v", name, got)
		}
	}
}

// TestAnswerKeepsTheWholeStreams: the answer shows the budget, and the
// store holds all that was kept for the resource the cut names.
func TestAnswerKeepsTheWholeStreams(t *testing.T) {
	m := manifest.Default()
	store := runs.NewArtifactStore(m.Artifacts.TTL(), int64(m.Artifacts.StoreBytes))
	code := 0
	whole := "HEAD\n" + strings.Repeat("line of output\n", 5000) + "TAIL\n"
	out := answer(context.Background(), m, store, contract.Result{RunID: "r_a", Status: contract.StatusOK, ExitCode: &code, Stdout: whole, StdoutBytes: int64(len(whole))})
	res := out.StructuredContent.(contract.Result)
	if res.StdoutCut == nil || !res.StdoutTruncated || len(res.Stdout) > m.Limits.AnswerChars+300 {
		t.Fatalf("not cut: %d characters", len(res.Stdout))
	}
	text := out.Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, "HEAD") || !strings.Contains(text, "TAIL") || !strings.Contains(text, res.StdoutCut.URI) {
		t.Fatalf("summary: %s", text[:200])
	}
	got, err := store.Stream(LocalPrincipal, "r_a", contract.StreamStdout)
	if err != nil || got != whole {
		t.Fatalf("the store has %d bytes, %v", len(got), err)
	}
	if _, err := store.Stream(LocalPrincipal, "r_a", contract.StreamStderr); err == nil {
		t.Fatal("an uncut stream is stored")
	}
}

func TestToolsForClientKeepsOthersSchemas(t *testing.T) {
	tl := mcp.NewToolWithRawSchema("run_code", "d", []byte(`{"type":"object"}`))
	tl.RawOutputSchema = OutputSchema()
	if got := ToolsForClient(context.Background(), []mcp.Tool{tl}); got[0].RawOutputSchema == nil {
		t.Fatal("an unknown client lost the output schema")
	}
}
