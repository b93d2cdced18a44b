package contract

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/runbox-mcp/runbox/manifest"
)

// TestKinds pins the contract's error kinds: a change here is a change of
// the contract, for the output schema, the tool description, the prompts
// and docs/design.md at once.
func TestKinds(t *testing.T) {
	want := []Kind{"syntax", "runtime", "timeout", "oom", "forbidden_syscall", "resource_limit", "output_limit",
		"invalid_request", "sandbox", "forbidden_network", "session_lost", "session_not_found", "workspace_busy",
		"checkpoint_not_found", "checkpoint_invalid"}
	if !slices.Equal(Kinds, want) {
		t.Fatalf("Kinds %v\nwant %v", Kinds, want)
	}
}

// TestKindSchemaIsKinds: the published enum is the list.
func TestKindSchemaIsKinds(t *testing.T) {
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	b, err := json.Marshal(r.Reflect(&ErrorInfo{}))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Kind struct {
				Type string
				Enum []Kind
			}
		}
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if k := s.Properties.Kind; k.Type != "string" || !slices.Equal(k.Enum, Kinds) {
		t.Errorf("kind's schema %+v, want the enum of %v", k, Kinds)
	}
}

// TestToolDescriptionNamesTheKinds: every kind a run can end in, and
// forbidden_network only where there is a network; never workspace_busy
// nor the checkpoint tools' own, which no run answers.
func TestToolDescriptionNamesTheKinds(t *testing.T) {
	m := manifest.Default()
	d := ToolDescription(m)
	if !strings.HasPrefix(d, m.Describe()) {
		t.Error("the description does not start with the manifest's")
	}
	for _, k := range Kinds {
		runs := k != KindForbiddenNetwork && k != KindWorkspaceBusy && k != KindCheckpointNotFound && k != KindCheckpointInvalid
		if got := strings.Contains(d, string(k)); got != runs {
			t.Errorf("without a network, names %s: %v", k, got)
		}
	}
	m.Network.Allow = []manifest.Endpoint{{Host: "api.example.com", Ports: []int{443}}}
	if d := ToolDescription(m); !strings.Contains(d, string(KindForbiddenNetwork)) {
		t.Errorf("with a network, forbidden_network unnamed:\n%s", d)
	}
}

// TestDesignNamesTheKinds: docs/design.md's row of error kinds names each.
func TestDesignNamesTheKinds(t *testing.T) {
	b, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `kind` |") {
			row = line
			break
		}
	}
	for _, k := range Kinds {
		if !strings.Contains(row, "`"+string(k)+"`") {
			t.Errorf("docs/design.md's kind row does not name %s: %q", k, row)
		}
	}
}
