package runs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestReadSourceStaysInsideItsFolder(t *testing.T) {
	top := t.TempDir()
	data := filepath.Join(top, "data")
	must(t, os.MkdirAll(filepath.Join(data, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(top, "secret.txt"), []byte("host secret"), 0o644))
	must(t, os.WriteFile(filepath.Join(data, "sub", "sales.csv"), []byte("a,b\n1,2\n"), 0o644))
	must(t, os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(data, "abs")))
	must(t, os.Symlink("../secret.txt", filepath.Join(data, "rel")))
	must(t, os.Symlink("sub/sales.csv", filepath.Join(data, "inside")))
	m := manifest.Default()
	m.Mounts = []manifest.Mount{{Name: "data", Path: data}}

	if got, err := readSource(m, "/mnt/data/sub/sales.csv", 1<<20); err != nil || string(got) != "a,b\n1,2\n" {
		t.Fatalf("a plain file: %q %v", got, err)
	}
	if got, err := readSource(m, "/mnt/data/inside", 1<<20); err != nil || string(got) != "a,b\n1,2\n" {
		t.Fatalf("a link inside the folder: %q %v", got, err)
	}
	for _, src := range []string{"/mnt/data/abs", "/mnt/data/rel", "/mnt/data/../secret.txt", "/mnt/data/sub/../../secret.txt", "/mnt/other/x", "/etc/passwd", "/mnt/data/sub", "/mnt/data/"} {
		if got, err := readSource(m, src, 1<<20); err == nil || strings.Contains(string(got), "secret") {
			t.Errorf("%s: read %q", src, got)
		}
	}
	if _, err := readSource(m, "/mnt/data/sub/sales.csv", 3); err == nil {
		t.Error("a file past the input limit was read")
	}
	// Through Validate: a typed error, and the content when fine.
	job, bad := Validate(m, RunCodeArgs{Language: "python", Code: "print(1)", Files: []InputFile{{Path: "s.csv", Source: "/mnt/data/sub/sales.csv"}}}, "r_1")
	if bad != nil || string(job.Files[0].Data) != "a,b\n1,2\n" {
		t.Fatalf("validate: %+v %+v", bad, job.Files)
	}
	if _, bad := Validate(m, RunCodeArgs{Language: "python", Code: "print(1)", Files: []InputFile{{Path: "s", Source: "/mnt/data/abs"}}}, "r_1"); bad == nil || bad.Kind != contract.KindInvalidRequest {
		t.Fatalf("an escaping link: %+v", bad)
	}
}

func TestSaveArtifactsNeverOverwritesOrEscapes(t *testing.T) {
	dir := t.TempDir()
	res := contract.Result{RunID: "r_1", Artifacts: []contract.Artifact{
		{Path: "out/plot.png", Data: []byte("png")}, {Path: "../escape", Data: []byte("x")}, {Path: "big", ContentOmitted: true}}}
	saveArtifacts(dir, &res)
	if got, _ := os.ReadFile(filepath.Join(dir, "r_1", "out", "plot.png")); string(got) != "png" || res.Artifacts[0].SavedTo != filepath.Join(dir, "r_1", "out", "plot.png") {
		t.Fatalf("saved %q at %q", got, res.Artifacts[0].SavedTo)
	}
	if res.Artifacts[1].SavedTo != "" || res.Artifacts[2].SavedTo != "" {
		t.Fatalf("saved what it must not: %+v", res.Artifacts)
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); err == nil {
		t.Fatal("an artifact escaped the folder")
	}
	again := contract.Result{RunID: "r_1", Artifacts: []contract.Artifact{{Path: "out/plot.png", Data: []byte("other")}}}
	saveArtifacts(dir, &again)
	if got, _ := os.ReadFile(filepath.Join(dir, "r_1", "out", "plot.png")); string(got) != "png" || again.Artifacts[0].SavedTo != "" {
		t.Fatalf("overwritten: %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
