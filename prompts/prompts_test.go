package prompts

import (
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestGuideSaysTheManifestsLimits(t *testing.T) {
	m := manifest.Default()
	m.Limits.TimeoutSeconds = 7
	m.Limits.MaxTimeoutSeconds = 42
	g := GuideText(m)
	for _, want := range []string{"7s (timeout_seconds up to 42)", "No network", "numpy", "plt.savefig", "error.kind"} {
		if !strings.Contains(g, want) {
			t.Errorf("guide lacks %q", want)
		}
	}
}

func TestDebugText(t *testing.T) {
	m := manifest.Default()
	res := `{"run_id":"r_1","language":"python","status":"error","error":{"kind":"runtime","type":"KeyError","message":"'x'","line":4,"hint":"Fix KeyError raised on line 4 and run again."}}`
	text, err := DebugText(m, res, "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`error.kind is "runtime" (KeyError) at line 4: 'x'`, "at most 2 times", "After 2 failed attempts, stop"} {
		if !strings.Contains(text, want) {
			t.Errorf("debug prompt lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range [][2]string{{"not json", ""}, {`{"status":"ok","error":null}`, ""}, {res, "0"}, {res, "x"}} {
		if _, err := DebugText(m, bad[0], bad[1]); err == nil {
			t.Errorf("accepted %q %q", bad[0], bad[1])
		}
	}
}
