package manifest

import (
	"os"
	"strings"
	"testing"
)

const (
	refBegin = "<!-- manifest-reference:begin (generated: UPDATE_DOCS=true go test ./manifest) -->\n"
	refEnd   = "<!-- manifest-reference:end -->"
)

// TestReadmeReferenceIsCurrent keeps the README's configuration reference
// generated from the schema; UPDATE_DOCS=true rewrites it.
func TestReadmeReferenceIsCurrent(t *testing.T) {
	const path = "../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, refBegin)
	end := strings.Index(readme, refEnd)
	if start < 0 || end < start {
		t.Fatalf("README.md lacks the markers %q ... %q", refBegin, refEnd)
	}
	want := readme[:start+len(refBegin)] + Reference() + readme[end:]
	if os.Getenv("UPDATE_DOCS") == "true" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != readme {
		t.Fatal("README.md's manifest reference drifted from the code: run UPDATE_DOCS=true go test ./manifest")
	}
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
