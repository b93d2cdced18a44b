package images

import (
	"os/exec"
	"strings"
	"testing"
)

// RecipeHash must agree with build.sh's own computation.
func TestRecipeHashMatchesBuildScript(t *testing.T) {
	out, err := exec.Command("bash", "-c", `cd .. && export LC_ALL=C && { sha256sum images/build.sh; find images/sandbox -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16`).Output()
	if err != nil {
		t.Skipf("no sha256sum here: %v", err)
	}
	if got, want := RecipeHash(), strings.TrimSpace(string(out)); got != want {
		t.Fatalf("RecipeHash %s, build.sh computes %s", got, want)
	}
}

// The linker flag .goreleaser.yaml passes pins the published image.
func TestPublishedByLinker(t *testing.T) {
	const ref = "ghcr.io/runbox-mcp/sandbox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	out, err := exec.Command("go", "run", "-ldflags", "-X github.com/runbox-mcp/runbox/images.published="+ref, "./testdata/published").CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if string(out) != ref {
		t.Fatalf("pinned %q, want %q", out, ref)
	}
	if Published() != "" {
		t.Fatalf("a test build pins %q", Published())
	}
}
