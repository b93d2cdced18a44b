package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestRootName(t *testing.T) {
	for in, want := range map[string]string{
		"My Project": "my-project",
		"../../etc":  "etc",
		"":           "root",
		"数据":         "root",
		"a__b--c":    "a__b--c",
		"-x-":        "x",
		"0123456789abcdefghijklmnopqrstuvwxyzXYZ": "0123456789abcdefghijklmnopqrstuv",
	} {
		if got := rootName(in, "/"); got != want {
			t.Errorf("rootName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := rootName("", "/home/me/Work Tree"); got != "work-tree" {
		t.Errorf("from the folder: %q", got)
	}
}

func TestRootMounts(t *testing.T) {
	top, outside := t.TempDir(), t.TempDir()
	a, b := filepath.Join(top, "a"), filepath.Join(top, "sub", "a")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(top, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	root := func(name, dir string) mcp.Root { return mcp.Root{Name: name, URI: "file://" + dir} }
	got := rootMounts(manifest.Roots{Mount: true, Under: []string{top}}, []mcp.Root{
		root("", a), root("", b), root("again", a),
		root("", outside), root("", filepath.Join(top, "link")), root("", filepath.Join(top, "file")),
		root("", filepath.Join(top, "missing")), root("", top+"/a/../../"+filepath.Base(outside)),
		{URI: "https://example.com/x"}, {URI: "file://otherhost" + a}, {URI: "file:relative"},
	}, nil)
	if len(got) != 2 || got[0].Target != "/mnt/roots/a" || got[1].Target != "/mnt/roots/a-2" || got[0].Source != a || got[1].Source != b {
		t.Fatalf("mounts %+v", got)
	}
	if got := rootMounts(manifest.Roots{Mount: true, Under: []string{a}}, []mcp.Root{root("", top)}, nil); len(got) != 0 {
		t.Fatalf("a parent of the allowed folder was mounted: %+v", got)
	}
}
