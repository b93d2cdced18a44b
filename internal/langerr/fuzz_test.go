package langerr_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/langerr"
	"github.com/runbox-mcp/runbox/manifest"
)

// fuzzCodePaths maps each error format of the built-in languages to the
// path the code runs from, as the sandbox passes it.
func fuzzCodePaths() map[string]string {
	paths := map[string]string{}
	for _, l := range manifest.Default().Languages {
		paths[l.ErrorFormat] = manifest.Workspace + "/" + l.File
	}
	return paths
}

// FuzzParse runs the parser of each built-in language's error format on
// arbitrary stderr and code, with the code path the sandbox uses, and every
// other parser on the same text. The parsers trust stderr: a program can
// print a traceback of its own, so a line number is not bounded by the
// code's length. What holds is that a reported line comes from stderr and
// from a location in the submitted file, that a Python column lies within
// its line of code, that the message is one bounded line of valid UTF-8 as
// FirstLine makes it, and that CRLF reads as LF. Seeds are every real
// capture in testdata and the committed corpus in testdata/fuzz/FuzzParse.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 20s ./internal/langerr
func FuzzParse(f *testing.F) {
	codePaths := fuzzCodePaths()
	files, _ := filepath.Glob(filepath.Join(testdata, "*", "*", "stderr*.txt"))
	if len(files) == 0 {
		f.Fatal("no captured stderr in testdata")
	}
	for _, p := range files {
		dir, _ := filepath.Rel(testdata, filepath.Dir(p))
		for _, g := range readGolden(f, filepath.ToSlash(dir)) {
			if g.file != filepath.Base(p) {
				continue
			}
			if codePaths[g.format] != g.codePath {
				f.Fatalf("%s: format %q runs %s in the sandbox, not %s", g.name, g.format, codePaths[g.format], g.codePath)
			}
			f.Add(g.format, g.stderr, g.code)
		}
	}
	f.Add("none", "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1, in <module>\nValueError: x\n", "x\n")
	f.Add("python", "  File \"/workspace/main.py\", line 99999999999999999999\n    x\n    ^\nSyntaxError: big\n", "x\n")
	f.Add("node", "file:///workspace/main.js:3\n\t\tfoo(é)\n\t\t    ^\n\nTypeError: bad\n    at file:///workspace/main.js:+3:0005\n", "a\nb\n\t\tfoo(é)\n")
	f.Add("bash", "/workspace/main.sh: eval: line 3: syntax error near unexpected token `)'\n/workspace/main.sh: line 0: x: y\n", "")
	f.Add("node", "\n#\n# Fatal javascript OOM in GC during deserialization\n#\n", "")

	f.Fuzz(func(t *testing.T, format, stderr, code string) {
		codePath, known := codePaths[format]
		if !known {
			codePath = manifest.Workspace + "/main.txt"
		}
		e, ok := langerr.Parse(format, stderr, codePath, code)
		// Line endings: CRLF reads as LF.
		if !strings.Contains(stderr, "\r") {
			crlf := strings.ReplaceAll(stderr, "\n", "\r\n")
			e2, ok2 := langerr.Parse(format, crlf, codePath, code)
			if ok2 != ok || e2 != e {
				t.Fatalf("with CRLF: %+v (ok %v), with LF: %+v (ok %v)", e2, ok2, e, ok)
			}
			if langerr.HeapExhausted(format, crlf) != langerr.HeapExhausted(format, stderr) {
				t.Fatal("HeapExhausted differs with CRLF")
			}
		}
		if format != "node" && langerr.HeapExhausted(format, stderr) {
			t.Fatalf("HeapExhausted for format %q", format)
		}
		if h := langerr.ResourceHint(stderr); !slices.Contains([]contract.Limit{"", contract.LimitDisk, contract.LimitOpenFiles, contract.LimitPids}, h) {
			t.Fatalf("hint %q", h)
		}
		// Every parser holds to the general promises on any text.
		for p, path := range codePaths {
			pe, pok := langerr.Parse(p, stderr, path, code)
			checkError(t, p, pe, pok)
		}
		checkError(t, format, e, ok)
		if !ok {
			return
		}
		if !known {
			t.Fatalf("format %q is no parser's, yet got %+v", format, e)
		}
		if e.Line > 0 {
			// The line is read from stderr, at a location in the
			// submitted file.
			if !strings.Contains(stderr, codePath) {
				t.Fatalf("line %d, but stderr never names %s", e.Line, codePath)
			}
			if !strings.Contains(stderr, strconv.Itoa(e.Line)) {
				t.Fatalf("line %d is not in stderr", e.Line)
			}
		}
		switch format {
		case "python":
			if e.Kind == contract.KindSyntax && e.Type != "SyntaxError" && e.Type != "IndentationError" && e.Type != "TabError" {
				t.Fatalf("syntax error of type %q", e.Type)
			}
			if e.Column > 0 {
				// Python's columns are worked out from the code itself.
				lines := strings.Split(code, "\n")
				if e.Line > len(lines) {
					t.Fatalf("column %d on line %d of %d-line code", e.Column, e.Line, len(lines))
				}
				src := strings.TrimSuffix(lines[e.Line-1], "\r")
				if e.Column > utf8.RuneCountInString(src)+1 {
					t.Fatalf("column %d past the end of line %d %q", e.Column, e.Line, src)
				}
			}
		case "node":
			if e.Kind == contract.KindSyntax && e.Type != "SyntaxError" {
				t.Fatalf("syntax error of type %q", e.Type)
			}
		case "bash":
			if e.Type != "" || e.Column != 0 {
				t.Fatalf("bash error with type %q, column %d", e.Type, e.Column)
			}
		}
	})
}

// checkError checks what Parse promises of any result.
func checkError(t *testing.T, format string, e langerr.Error, ok bool) {
	t.Helper()
	if !ok {
		if e != (langerr.Error{}) {
			t.Fatalf("%s: not ok but %+v", format, e)
		}
		return
	}
	if e.Kind != contract.KindSyntax && e.Kind != contract.KindRuntime {
		t.Fatalf("%s: kind %q", format, e.Kind)
	}
	if e.Line < 0 || e.Column < 0 || e.Column > 0 && e.Line == 0 {
		t.Fatalf("%s: position %d:%d", format, e.Line, e.Column)
	}
	if len(e.Message) > 500 || !utf8.ValidString(e.Message) || strings.ContainsAny(e.Message, "\r\n") || contract.FirstLine(e.Message) != e.Message {
		t.Fatalf("%s: message %q", format, e.Message)
	}
}

// The committed corpus is FuzzParse's only while the names match: a
// renamed fuzz test would silently leave it unread.
func TestFuzzCorpusCommitted(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(testdata, "fuzz", "FuzzParse"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("no committed corpus for FuzzParse: %v", err)
	}
}
