package tools

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/expose"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/inflight"
	"github.com/runbox-mcp/runbox/sandbox"
)

// TestToolSnapshots compares the published definition of every tool with
// its golden file; UPDATE_TOOLSNAPS=true rewrites them.
func TestToolSnapshots(t *testing.T) {
	m := manifest.Default()
	all := []mcp.Tool{RunCode(Deps{Service: runs.Service{Manifest: m}}).Tool}
	for _, st := range SessionTools(Deps{Service: runs.Service{Manifest: m, Runner: (*sandbox.BoxRunner)(nil)}}) {
		all = append(all, st.Tool)
	}
	for _, st := range RunHandleTools(Deps{Service: runs.Service{Manifest: m}, InFlight: inflight.New(runs.Service{Manifest: m}, nil, nil)}) {
		all = append(all, st.Tool)
	}
	wm := manifest.Default()
	wm.Workspaces.Enabled = true
	for _, st := range WorkspaceTools(Deps{Service: runs.Service{Manifest: wm, Runner: (*sandbox.BoxRunner)(nil)}}) {
		all = append(all, st.Tool)
	}
	on := manifest.DefaultExpose()
	on.Enabled = true
	for _, st := range ExposeTools(expose.New(on, (*sandbox.BoxRunner)(nil), nil, nil)) {
		all = append(all, st.Tool)
	}
	if len(all) != 11 {
		t.Fatalf("%d tools", len(all))
	}
	for _, tool := range all {
		snapshot(t, tool)
	}
}

func snapshot(t *testing.T, tool mcp.Tool) {
	t.Helper()
	got, err := json.MarshalIndent(tool, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "snapshots", tool.Name+".json")
	if os.Getenv("UPDATE_TOOLSNAPS") == "true" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TOOLSNAPS=true to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s drifted from the code; review and rerun with UPDATE_TOOLSNAPS=true\ngot:\n%s", path, got)
	}
}

func TestSchemasAreStrictClientFriendly(t *testing.T) {
	m := manifest.Default()
	for name, raw := range map[string]json.RawMessage{"input": InputSchema(m), "output": OutputSchema()} {
		var s map[string]any
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if s["type"] != "object" {
			t.Errorf("%s: type %v", name, s["type"])
		}
		walk(s, func(node map[string]any) {
			if node["type"] == "array" && node["items"] == nil {
				t.Errorf("%s: an array without items: %v", name, node)
			}
			if _, ok := node["$ref"]; ok {
				t.Errorf("%s: $ref present", name)
			}
		})
	}
	var in struct {
		Properties map[string]struct {
			Enum    []string `json:"enum"`
			Maximum float64  `json:"maximum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(InputSchema(m), &in)
	if len(in.Properties["language"].Enum) != 4 || in.Properties["timeout_seconds"].Maximum != 300 {
		t.Errorf("manifest not reflected in the input schema: %+v", in.Properties)
	}
}

func walk(v any, f func(map[string]any)) {
	switch n := v.(type) {
	case map[string]any:
		f(n)
		for _, c := range n {
			walk(c, f)
		}
	case []any:
		for _, c := range n {
			walk(c, f)
		}
	}
}

func TestToCallToolResult(t *testing.T) {
	m := manifest.Default()
	code := 1
	res := contract.Result{RunID: "r_x", Language: "python", Status: contract.StatusError, ExitCode: &code,
		Stdout: "out\n", Stderr: "Traceback...\n",
		Error: &contract.ErrorInfo{Kind: contract.KindRuntime, Type: "ValueError", Message: "bad", Line: 3, Hint: "Fix it."},
		Artifacts: []contract.Artifact{
			{Path: "plot.png", MimeType: "image/png", SizeBytes: 3, Data: []byte{1, 2, 3}},
			{Path: "big.png", MimeType: "image/png", SizeBytes: int64(m.Limits.ImageBytes) + 1, Data: []byte{1}},
			{Path: "data.csv", MimeType: "text/csv", SizeBytes: 3, Data: []byte("a,b")},
		}}
	out := ToCallToolResult(m, res)
	if !out.IsError || len(out.Content) != 5 {
		t.Fatalf("isError %v, %d content blocks", out.IsError, len(out.Content))
	}
	text, _ := mcp.AsTextContent(out.Content[0])
	for _, want := range []string{"error: runtime ValueError at line 3: bad", "hint: Fix it.", "--- stdout ---\nout", "plot.png (image/png, 3 bytes)"} {
		if !bytes.Contains([]byte(text.Text), []byte(want)) {
			t.Errorf("summary lacks %q:\n%s", want, text.Text)
		}
	}
	if img, ok := mcp.AsImageContent(out.Content[1]); !ok || img.Data != "AQID" {
		t.Errorf("image block %+v", out.Content[1])
	}
	if link, ok := out.Content[4].(mcp.ResourceLink); !ok || link.Name != "data.csv" {
		t.Errorf("resource links: %+v", out.Content[2:])
	}
	m.Artifacts.ImageDelivery = manifest.ImagesResourceLink
	if n := len(ToCallToolResult(m, res).Content); n != 4 {
		t.Errorf("resource_link delivery: %d blocks, want the summary and 3 links", n)
	}
	raw, _ := json.Marshal(out.StructuredContent)
	if bytes.Contains(raw, []byte(`"Data"`)) || !bytes.Contains(raw, []byte(`"error":{"kind":"runtime"`)) {
		t.Errorf("structured content: %s", raw)
	}
	ok := contract.Result{Status: contract.StatusOK, Artifacts: []contract.Artifact{}}
	raw, _ = json.Marshal(ToCallToolResult(m, ok).StructuredContent)
	if !bytes.Contains(raw, []byte(`"error":null`)) || !bytes.Contains(raw, []byte(`"exit_code":null`)) || !bytes.Contains(raw, []byte(`"artifacts":[]`)) {
		t.Errorf("ok result: %s", raw)
	}
}
