package manifest

import (
	"encoding/json"

	"github.com/invopop/jsonschema"
)

// JSONSchema lets a size be a number of bytes or a string with a unit.
func (ByteSize) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Description: `A size: a number of bytes, or a string such as "64MiB", "1.5GiB", "512KiB".`,
		OneOf: []*jsonschema.Schema{
			{Type: "integer", Minimum: json.Number("0")},
			{Type: "string", Pattern: `^\s*[0-9]+(\.[0-9]+)?\s*(B|KiB|MiB|GiB)?\s*$`},
		},
	}
}

// Schema is the manifest file's JSON Schema, for editors and validators,
// reflected from the same types the server loads.
func Schema() json.RawMessage {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, AllowAdditionalProperties: false, RequiredFromJSONSchemaTags: true}
	s := r.Reflect(&Manifest{})
	s.ID = ""
	s.Title = "runbox manifest"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // our own types always marshal
	}
	return b
}
