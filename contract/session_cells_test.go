package contract

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseSessionCellsURI(t *testing.T) {
	for uri, want := range map[string]string{
		SessionCellsURI("s_abc"):            "s_abc",
		"runbox://sessions/s_abc/cells":     "s_abc",
		"runbox://sessions//cells":          "",
		"runbox://sessions/a/b/cells":       "",
		"runbox://sessions/s_abc/cells?x=1": "",
		"runbox://runs/r_1/cells":           "",
	} {
		id, ok := ParseSessionCellsURI(uri)
		if id != want && ok || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", uri, id, ok, want)
		}
	}
}

func TestCellOf(t *testing.T) {
	one := 1
	res := Result{RunID: "r_1", Language: "python", Status: StatusError, ExitCode: &one,
		Error:  &ErrorInfo{Kind: KindRuntime, Message: "NameError: x\nmore", Line: 3},
		Stdout: strings.Repeat("a", CellOutputBytes-1) + "\xff\xfe", Stderr: "boom",
		Displays: make([]Display, 2), Metrics: Metrics{WallMs: 12}}
	for i := range CellArtifacts + 3 {
		res.Artifacts = append(res.Artifacts, Artifact{Path: "f" + string(rune('a'+i)), URI: ArtifactURI("r_1", "f")})
	}
	c := CellOf(4, "x\n", res, time.Unix(0, 0))
	if c.Seq != 4 || c.Code != "x\n" || c.CodeBytes != 2 || c.ErrorKind != KindRuntime || c.Error != "NameError: x" || c.ErrorLine != 3 || c.Displays != 2 || c.WallMs != 12 || *c.ExitCode != 1 {
		t.Fatalf("%+v", c)
	}
	if len(c.Stdout) > CellOutputBytes || !utf8.ValidString(c.Stdout) || !c.OutputCut || c.Stderr != "boom" || len(c.Artifacts) != CellArtifacts {
		t.Fatalf("bounds: stdout %d bytes, cut %v, %d artifacts", len(c.Stdout), c.OutputCut, len(c.Artifacts))
	}
}
