package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

func TestWriteDisplays(t *testing.T) {
	rows, cols := int64(3), int64(2)
	displays := []contract.Display{
		{Index: 0, Source: "show", Mimes: map[string]contract.DisplayMime{
			"image/png":  {Bytes: 4, Width: 40, Height: 30, URI: contract.DisplayURI("r_1", 0, "image.png"), Data: []byte("png!")},
			"text/plain": {Bytes: 6, URI: contract.DisplayURI("r_1", 0, "text.txt"), Data: []byte("<Fig>\n")},
		}},
		// Cut: its data was not kept, so no file is written for it.
		{Index: 1, Source: "display", Cut: contract.DisplayCutBytes, Mimes: map[string]contract.DisplayMime{
			"image/png": {Bytes: 1 << 30},
		}},
		{Index: 2, Source: "table", Mimes: map[string]contract.DisplayMime{
			contract.TableMime: {Bytes: 2, Rows: &rows, Columns: &cols, URI: contract.DisplayURI("r_1", 2, "table.json"), Data: []byte("{}")},
		}},
	}
	dir := filepath.Join(t.TempDir(), "out")
	files, err := writeDisplays(dir, displays)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"displays/0-image.png", "displays/0-text.txt"}, nil, {"displays/2-table.json"}}
	if len(files) != len(want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	for i := range want {
		if !slices.Equal(files[i], want[i]) {
			t.Errorf("display %d's files %v, want %v", i, files[i], want[i])
		}
	}
	for path, data := range map[string]string{"displays/0-image.png": "png!", "displays/0-text.txt": "<Fig>\n", "displays/2-table.json": "{}"} {
		if b, err := os.ReadFile(filepath.Join(dir, path)); err != nil || string(b) != data {
			t.Errorf("%s: %q %v, want %q", path, b, err, data)
		}
	}
	if got, _ := os.ReadDir(filepath.Join(dir, "displays")); len(got) != 3 {
		t.Errorf("displays/ holds %d files, want 3", len(got))
	}

	for i, line := range []string{
		"display 0 (show): image/png 40x30 in displays/0-image.png, text/plain in displays/0-text.txt",
		"display 1 (display): image/png (cut: bytes)",
		"display 2 (table): application/vnd.runbox.table+json 3 rows x 2 columns in displays/2-table.json",
	} {
		if got := describeDisplay(displays[i], files[i]); got != line {
			t.Errorf("display %d is described %q, want %q", i, got, line)
		}
	}
	if got := describeDisplay(displays[0], nil); got != "display 0 (show): image/png 40x30, text/plain" {
		t.Errorf("without --out: %q", got)
	}
}

// A display's file is named from its URI: a URI whose name is a path
// writes nothing, inside the directory or out of it.
func TestWriteDisplaysStaysInside(t *testing.T) {
	dir := t.TempDir()
	d := contract.Display{Index: 0, Source: "display", Mimes: map[string]contract.DisplayMime{
		"text/plain": {URI: "runbox://runs/r_1/displays/0/../../x", Data: []byte("x")},
	}}
	files, err := writeDisplays(dir, []contract.Display{d})
	if err != nil || len(files[0]) != 0 {
		t.Errorf("a URI whose name is no file name wrote %v (%v)", files, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a file was written outside displays/")
	}
}
