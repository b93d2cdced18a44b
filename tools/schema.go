package tools

import (
	"encoding/base64"
	"encoding/json"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/invopop/jsonschema"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

// reflectSchema reflects a Go type inline: no $ref, no $defs, no $id, so
// that strict clients and validators take it as it is.
func reflectSchema(v any) *jsonschema.Schema {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	s := r.Reflect(v)
	s.ID = ""
	s.Version = ""
	return s
}

// InputSchema is run_code's input schema, with the language enum and the
// timeout maximum taken from the manifest.
func InputSchema(m *manifest.Manifest) json.RawMessage {
	s := reflectSchema(&RunCodeArgs{})
	if p, ok := s.Properties.Get("language"); ok {
		for _, n := range m.LanguageNames() {
			p.Enum = append(p.Enum, n)
		}
	}
	if p, ok := s.Properties.Get("timeout_seconds"); ok {
		p.Maximum = json.Number(jsonNumber(m.Limits.MaxTimeoutSeconds))
		p.Minimum = json.Number(jsonNumber(runs.MinTimeoutSeconds))
		p.Default = m.Limits.TimeoutSeconds
	}
	return mustJSON(s)
}

// OutputSchema is the schema of the structured result. Fields that are
// null in some results say so.
func OutputSchema() json.RawMessage {
	s := reflectSchema(&contract.Result{})
	for _, name := range []string{"error", "exit_code"} {
		if p, ok := s.Properties.Get(name); ok {
			inner := *p
			desc := inner.Description
			inner.Description = ""
			*p = jsonschema.Schema{Description: desc, AnyOf: []*jsonschema.Schema{&inner, {Type: "null"}}}
		}
	}
	return mustJSON(s)
}

func jsonNumber(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a schema of our own types always marshals
	}
	return b
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
