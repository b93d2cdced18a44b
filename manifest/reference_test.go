package manifest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const (
	refBegin = "<!-- manifest-reference:begin (generated: UPDATE_DOCS=true go test ./manifest) -->\n"
	refEnd   = "<!-- manifest-reference:end -->"
	refPath  = "../docs/configuration.md"
)

// TestConfigurationReferenceIsCurrent keeps docs/configuration.md's table of
// every setting generated from the schema and the defaults;
// UPDATE_DOCS=true rewrites it.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	b, err := os.ReadFile(refPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, refBegin)
	end := strings.Index(doc, refEnd)
	if start < 0 || end < start {
		t.Fatalf("%s lacks the markers %q ... %q", refPath, refBegin, refEnd)
	}
	want := doc[:start+len(refBegin)] + Reference() + doc[end:]
	if os.Getenv("UPDATE_DOCS") == "true" {
		if err := os.WriteFile(refPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Fatalf("%s drifted from the manifest's schema: run UPDATE_DOCS=true go test ./manifest", refPath)
	}
}

// TestReferenceNamesEverySetting: every leaf of the schema (a map counting
// as one) has its row, so a new field cannot be left out of the reference.
func TestReferenceNamesEverySetting(t *testing.T) {
	ref := Reference()
	var schema map[string]any
	if err := json.Unmarshal(Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for n, v := range props {
			p := v.(map[string]any)
			path := prefix + n
			if _, ok := p["properties"]; ok {
				walk(path+".", p)
				continue
			}
			if !strings.Contains(ref, "| `"+path+"` |") {
				t.Errorf("the reference has no row for %s", path)
			}
			if items, ok := p["items"].(map[string]any); ok {
				if _, ok := items["properties"]; ok {
					walk(path+"[].", items)
				}
			}
		}
	}
	walk("", schema)
}

func TestSchemaDescribesEveryField(t *testing.T) {
	ref := Reference()
	for _, line := range strings.Split(strings.TrimSpace(ref), "\n")[2:] {
		cells := strings.Split(line, " | ")
		if strings.TrimSpace(strings.TrimSuffix(cells[len(cells)-1], "|")) == "" {
			t.Errorf("no description: %s", line)
		}
	}
}
