package docker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/volume"

	"github.com/runbox-mcp/runbox/sandbox"
)

// A server prunes only the runbox-init volumes of other builds that are
// past the newest few and a day old: a server of another version sharing
// the engine (another checkout, a rolling upgrade) keeps its volume.
func TestStaleInitVolumes(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	vol := func(name string, age time.Duration) volume.Volume {
		return volume.Volume{Name: name, CreatedAt: now.Add(-age).Format(time.RFC3339)}
	}
	for _, c := range []struct {
		name string
		vols []volume.Volume
		want []string
	}{
		{"none", nil, nil},
		{"only the current one", []volume.Volume{vol("cur", 48*time.Hour)}, nil},
		{"the newest others stay", []volume.Volume{vol("cur", 0), vol("a", 50*time.Hour), vol("b", 60*time.Hour), vol("c", 70*time.Hour)}, nil},
		{"past the newest, old ones go", []volume.Volume{vol("cur", 0), vol("a", 50*time.Hour), vol("b", 60*time.Hour), vol("c", 70*time.Hour), vol("d", 80*time.Hour), vol("e", 90*time.Hour)}, []string{"d", "e"}},
		{"past the newest, recent ones stay", []volume.Volume{vol("cur", 0), vol("a", time.Minute), vol("b", 2*time.Minute), vol("c", 3*time.Minute), vol("d", 4*time.Minute), vol("e", 30*time.Hour)}, []string{"e"}},
		{"an unreadable time goes", []volume.Volume{vol("a", 1), vol("b", 2), vol("c", 3), {Name: "odd", CreatedAt: ""}}, []string{"odd"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := stale(c.vols, "cur", now); !slices.Equal(got, c.want) {
				t.Errorf("stale = %v, want %v", got, c.want)
			}
		})
	}
}

// The image's absence is told apart from other start failures (which are
// tried once more) and still reads as an engine error.
func TestImageMissingIsAnEngineError(t *testing.T) {
	err := imageMissing("runbox/sandbox:x")
	var ee *sandbox.EngineError
	if !isImageMissing(err) || !errors.As(err, &ee) || ee.Hint == "" {
		t.Fatalf("imageMissing: %v (missing %v)", err, isImageMissing(err))
	}
	// A derived image of the manifest's packages says how to build it.
	err = imageMissing("runbox/sandbox-packages:0123456789abcdef")
	if !isImageMissing(err) || !errors.As(err, &ee) || !strings.Contains(ee.Hint, "runbox images build") {
		t.Fatalf("a missing derived image: %v (hint %q)", err, ee.Hint)
	}
	if isImageMissing(&sandbox.EngineError{Msg: "the sandbox image is fine, the engine is not"}) {
		t.Error("another engine error reads as a missing image")
	}
}
