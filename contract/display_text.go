package contract

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// What the text summary gives displays: tables as markdown up to these
// sizes, and all displays' text together up to DisplayTextChars; the rest
// is in the structured result and the displays' resources.
const (
	TableTextRows    = 20
	TableTextColumns = 12
	TableCellChars   = 40
	DisplayTextChars = 8000
	// displayLineChars bounds one text representation in the summary.
	displayLineChars = 2000
)

// TableMarkdown renders the head of a table as a markdown table, at most
// rows rows and cols columns of cells of at most cellChars characters,
// ending with its whole shape: "(R rows x C columns)".
func TableMarkdown(t *Table, rows, cols, cellChars int) string {
	var b strings.Builder
	cell := func(v any) string {
		var s string
		switch x := v.(type) {
		case nil:
			s = ""
		case string:
			s = x
		case float64:
			s = strings.TrimSuffix(fmt.Sprintf("%.6g", x), ".0")
		default:
			s = fmt.Sprint(x)
		}
		s = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
		if utf8.RuneCountInString(s) > cellChars {
			s = string([]rune(s)[:cellChars-1]) + "…"
		}
		return s
	}
	ncols := len(t.Columns)
	shown := min(ncols, cols)
	hasIndex := len(t.Index) > 0
	b.WriteString("|")
	if hasIndex {
		b.WriteString(" " + cell(t.IndexName) + " |")
	}
	for _, c := range t.Columns[:shown] {
		b.WriteString(" " + cell(c) + " |")
	}
	if shown < ncols {
		b.WriteString(" … |")
	}
	b.WriteString("\n|")
	for i := 0; i < shown+btoi(hasIndex)+btoi(shown < ncols); i++ {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for r, row := range t.Rows {
		if r == rows {
			break
		}
		b.WriteString("|")
		if hasIndex {
			var label any
			if r < len(t.Index) {
				label = t.Index[r]
			}
			b.WriteString(" " + cell(label) + " |")
		}
		for c := 0; c < shown; c++ {
			var v any
			if c < len(row) {
				v = row[c]
			}
			b.WriteString(" " + cell(v) + " |")
		}
		if shown < ncols {
			b.WriteString(" … |")
		}
		b.WriteString("\n")
	}
	R, C := int64(len(t.Rows)), int64(ncols)
	if len(t.Shape) == 2 {
		R, C = t.Shape[0], t.Shape[1]
	}
	if int64(min(len(t.Rows), rows)) < R || int64(shown) < C {
		fmt.Fprintf(&b, "(first %d rows and %d columns of %d rows x %d columns)", min(len(t.Rows), rows), shown, R, C)
	} else {
		fmt.Fprintf(&b, "(%d rows x %d columns)", R, C)
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// displaysText is the summary's section on displays: each in order, in the
// form the model reads best (a table as markdown, a text as itself, an
// image by its size: the image itself is a content block of its own; HTML
// only by its resource), within DisplayTextChars.
func displaysText(res Result) string {
	if len(res.Displays) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("displays:\n")
	left := DisplayTextChars
	for _, d := range res.Displays {
		var e strings.Builder
		fmt.Fprintf(&e, "  #%d %s, after %d bytes of stdout", d.Index, d.Source, d.After.Stdout)
		if d.Cut != "" {
			fmt.Fprintf(&e, " (cut: %s)", d.Cut)
		}
		e.WriteString(":\n")
		text := false
		for _, mime := range DisplayMimeOrder {
			m, ok := d.Mimes[mime]
			if !ok {
				continue
			}
			where := m.URI
			if where == "" {
				where = "not kept"
			}
			switch {
			case mime == TableMime && m.Markdown != "":
				fmt.Fprintf(&e, "  table, all of it: %s\n%s\n", where, m.Markdown)
				text = true
			case mime == TableMime:
				fmt.Fprintf(&e, "  table (%d bytes) %s\n", m.Bytes, where)
			case strings.HasPrefix(mime, "image/"):
				fmt.Fprintf(&e, "  %s (%s%d bytes) %s\n", mime, sizeOf(m), m.Bytes, where)
			case mime == "text/html":
				fmt.Fprintf(&e, "  text/html (%d bytes, not shown here) %s\n", m.Bytes, where)
			case mime == "text/plain" && text:
				// A richer form said it already.
			case m.Text != "":
				fmt.Fprintf(&e, "  %s (%d bytes) %s\n%s\n", mime, m.Bytes, where, headRunes(m.Text, displayLineChars))
				text = true
			default:
				fmt.Fprintf(&e, "  %s (%d bytes) %s\n", mime, m.Bytes, where)
			}
		}
		s := e.String()
		if n := utf8.RuneCountInString(s); n > left {
			fmt.Fprintf(&b, "  #%d %s: more in the structured result's displays (the answer's text for displays is spent)\n", d.Index, d.Source)
			left = 0
			continue
		} else {
			left -= n
		}
		b.WriteString(s)
	}
	if res.DisplaysOmitted > 0 {
		fmt.Fprintf(&b, "  (%d more displays omitted: a run keeps at most %d)\n", res.DisplaysOmitted, len(res.Displays))
	}
	return b.String()
}

func headRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
