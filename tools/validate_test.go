package tools

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/runbox-mcp/runbox/manifest"
)

// compile checks a schema against its draft's meta-schema with a strict
// validator, and returns it for validating instances.
func compile(t *testing.T, name string, raw []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatalf("%s does not compile under a strict validator: %v", name, err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, v any) error {
	t.Helper()
	b, _ := json.Marshal(v)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst)
}

func TestSchemasValidateRealInstances(t *testing.T) {
	m := manifest.Default()
	in := compile(t, "input.json", InputSchema(m))
	out := compile(t, "output.json", OutputSchema())
	compile(t, "manifest.json", manifest.Schema())

	for _, args := range []string{
		`{"language":"python","code":"print(1)"}`,
		`{"language":"bash","code":"x","stdin":"s","timeout_seconds":2,"files":[{"path":"a","content":"eA==","encoding":"base64"}]}`,
	} {
		var v any
		_ = json.Unmarshal([]byte(args), &v)
		if err := validate(t, in, v); err != nil {
			t.Errorf("valid arguments rejected: %s: %v", args, err)
		}
	}
	for _, args := range []string{`{"code":"x"}`, `{"language":"ruby","code":"x"}`, `{"language":"python","code":"x","timeout_seconds":301}`, `{"language":"python","code":"x","files":[{"path":"a","content":"","encoding":"hex"}]}`} {
		var v any
		_ = json.Unmarshal([]byte(args), &v)
		if err := validate(t, in, v); err == nil {
			t.Errorf("invalid arguments accepted by the schema: %s", args)
		}
	}

	code := 1
	results := []contract.Result{
		{RunID: "r_1", Language: "python", Status: "ok", ExitCode: new(int), Artifacts: []contract.Artifact{{Path: "a.png", SizeBytes: 3, MimeType: "image/png", SHA256: "ab", URI: "runbox://runs/r_1/files/a.png"}}, Isolation: "runc", Image: "sha256:x"},
		{RunID: "r_2", Language: "python", Status: "error", ExitCode: &code, Error: &contract.ErrorInfo{Kind: "runtime", Type: "ValueError", Message: "m", Line: 2, Hint: "h"}, Artifacts: []contract.Artifact{}},
		contract.Fail(contract.Job{RunID: "r_3"}, contract.ErrorInfo{Kind: "invalid_request", Message: "m", Hint: "h"}),
	}
	for _, r := range results {
		if err := validate(t, out, r); err != nil {
			t.Errorf("result %s does not match the output schema: %v", r.RunID, err)
		}
	}
	bad := results[1]
	bad.Error = &contract.ErrorInfo{Kind: "weird", Message: "m", Hint: "h"}
	if err := validate(t, out, bad); err == nil {
		t.Error("an unknown error kind passes the output schema")
	}
}
