package contract

import (
	"strings"
	"testing"
)

func TestTableMarkdown(t *testing.T) {
	tab := &Table{
		Columns: []any{"name", "n|pipe", "c"},
		Index:   []any{"x", "y", "z"},
		Rows:    [][]any{{"a\nb", 1.5, nil}, {strings.Repeat("w", 50), float64(3), true}, {"z", 2.0, false}},
		Shape:   []int64{1000000, 3},
	}
	got := TableMarkdown(tab, 2, 2, 10)
	want := "|  | name | n\\|pipe | … |\n| --- | --- | --- | --- |\n| x | a b | 1.5 | … |\n| y | wwwwwwwww… | 3 | … |\n(first 2 rows and 2 columns of 1000000 rows x 3 columns)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	whole := &Table{Columns: []any{"a"}, Index: []any{"north"}, IndexName: "region", Rows: [][]any{{1.0}}, Shape: []int64{1, 1}}
	if got := TableMarkdown(whole, 20, 20, 40); got != "| region | a |\n| --- | --- |\n| north | 1 |\n(1 rows x 1 columns)" {
		t.Errorf("whole table:\n%s", got)
	}
}

func TestDisplayURI(t *testing.T) {
	uri := DisplayURI("r_1", 3, "image.png")
	if uri != "runbox://runs/r_1/displays/3/image.png" {
		t.Fatal(uri)
	}
	if run, i, name, ok := ParseDisplayURI(uri); !ok || run != "r_1" || i != 3 || name != "image.png" {
		t.Errorf("%s %d %s %v", run, i, name, ok)
	}
	for _, bad := range []string{"runbox://runs/r_1/displays/-1/a", "runbox://runs/r_1/displays/x/a", "runbox://runs/r_1/displays/1/a/b", "runbox://runs//displays/1/a", "runbox://runs/r_1/files/a", "other://runs/r_1/displays/1/a"} {
		if _, _, _, ok := ParseDisplayURI(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestSummaryDisplays(t *testing.T) {
	rows, cols := int64(5), int64(1)
	res := Result{RunID: "r_1", Status: StatusOK, Stdout: "hi\n", Displays: []Display{
		{Index: 0, Source: "show", After: After{Stdout: 3}, Mimes: map[string]DisplayMime{"image/png": {Bytes: 100, Width: 640, Height: 480, URI: "runbox://runs/r_1/displays/0/image.png"}}},
		{Index: 1, Source: "display", Mimes: map[string]DisplayMime{"text/html": {Bytes: 20, URI: "u"}, "text/plain": {Bytes: 4, Text: "<b>"}}},
		{Index: 2, Source: "result", Mimes: map[string]DisplayMime{TableMime: {Rows: &rows, Columns: &cols, Markdown: TableMarkdown(&Table{Columns: []any{"a"}, Rows: [][]any{{1.0}}, Shape: []int64{5, 1}}, TableTextRows, TableTextColumns, TableCellChars)}, "text/plain": {Text: "repr"}}},
		{Index: 3, Source: "display", Cut: DisplayCutInvalidData, Mimes: map[string]DisplayMime{"image/png": {Bytes: 7}}},
	}, DisplaysOmitted: 2}
	s := Summary(res)
	for _, want := range []string{
		"#0 show, after 3 bytes of stdout:\n  image/png (640x480, 100 bytes) runbox://runs/r_1/displays/0/image.png",
		"text/html (20 bytes, not shown here) u",
		"text/plain (4 bytes)",
		"| a |\n| --- |\n| 1 |\n(first 1 rows and 1 columns of 5 rows x 1 columns)",
		"#3 display, after 0 bytes of stdout (cut: invalid_data):\n  image/png (7 bytes) not kept",
		"(2 more displays omitted",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "repr") {
		t.Errorf("a table's text/plain is said once, as the table:\n%s", s)
	}
	// The displays' text is bounded.
	many := Result{RunID: "r_2", Status: StatusOK}
	for i := 0; i < 64; i++ {
		many.Displays = append(many.Displays, Display{Index: i, Source: "display", Mimes: map[string]DisplayMime{"text/plain": {Text: strings.Repeat("x", 1500)}}})
	}
	if n := len(Summary(many)); n > DisplayTextChars+64*120 {
		t.Errorf("summary of 64 long displays is %d characters", n)
	}
}
