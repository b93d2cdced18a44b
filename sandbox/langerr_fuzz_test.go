package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// fzCodePaths maps each error format of the built-in languages to the path
// the code runs from, as classify passes it.
func fzCodePaths() map[string]string {
	paths := map[string]string{}
	for _, l := range manifest.Default().Languages {
		paths[l.ErrorFormat] = manifest.Workspace + "/" + l.File
	}
	return paths
}

// fzLangSamples are real captures from testdata/langerr, one stderr each.
var fzLangSamples = []struct{ dir, stderr string }{
	{"python/zero_division", "stderr.txt"},
	{"python/error_in_helper", "stderr.txt"},
	{"python/syntax_indented_column", "stderr.txt"},
	{"python/exception_group", "stderr.txt"},
	{"python/unicode_runtime_column", "stderr.txt"},
	{"node/reference_error", "stderr.node18.txt"},
	{"node/syntax_unexpected_token", "stderr.node20.txt"},
	{"node/throw_string", "stderr.node18.txt"},
	{"node/unicode_runtime_column", "stderr.node20.txt"},
	{"bash/unbound_variable", "stderr.txt"},
	{"bash/syntax_unexpected_token", "stderr.txt"},
	{"bash/command_not_found", "stderr.txt"},
}

// FuzzParseLangErrorByFormat runs the error parser of each built-in
// language's error_format on arbitrary stderr and code, with the code path
// classify uses. The parsers trust stderr: a program can print a
// traceback of its own, so a line number is not bounded by the code's
// length. What holds is that a reported line comes from stderr and from a
// location in the submitted file, that a Python column lies within its
// line of code, and that the message is one bounded line of valid UTF-8.
//
//	go test -run '^$' -fuzz '^FuzzParseLangErrorByFormat$' -fuzztime 20s ./sandbox
func FuzzParseLangErrorByFormat(f *testing.F) {
	codePaths := fzCodePaths()
	for _, s := range fzLangSamples {
		stderr, err := os.ReadFile(filepath.Join(langErrData, s.dir, s.stderr))
		if err != nil {
			f.Fatal(err)
		}
		mains, _ := filepath.Glob(filepath.Join(langErrData, s.dir, "main.*"))
		if len(mains) != 1 {
			f.Fatalf("%s: %v", s.dir, mains)
		}
		code, err := os.ReadFile(mains[0])
		if err != nil {
			f.Fatal(err)
		}
		format, _ := parserFor(mains[0])
		if _, ok := codePaths[format]; !ok {
			f.Fatalf("%s: format %q is no built-in language's", s.dir, format)
		}
		f.Add(format, string(stderr), string(code))
	}
	f.Add("none", "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1, in <module>\nValueError: x\n", "x\n")
	f.Add("python", "  File \"/workspace/main.py\", line 99999999999999999999\n    x\n    ^\nSyntaxError: big\n", "x\n")
	f.Add("node", "file:///workspace/main.js:3\n\t\tfoo(é)\n\t\t    ^\n\nTypeError: bad\n    at file:///workspace/main.js:+3:0005\n", "a\nb\n\t\tfoo(é)\n")
	f.Add("bash", "/workspace/main.sh: eval: line 3: syntax error near unexpected token `)'\n/workspace/main.sh: line 0: x: y\n", "")

	f.Fuzz(func(t *testing.T, format, stderr, code string) {
		codePath, known := codePaths[format]
		if !known {
			codePath = manifest.Workspace + "/main.txt"
		}
		le, ok := ParseLangError(format, stderr, codePath, code)
		// Line endings: CRLF reads as LF.
		if !strings.Contains(stderr, "\r") {
			crlf, crlfOK := ParseLangError(format, strings.ReplaceAll(stderr, "\n", "\r\n"), codePath, code)
			if crlfOK != ok || crlf != le {
				t.Fatalf("with CRLF: %+v (ok %v), with LF: %+v (ok %v)", crlf, crlfOK, le, ok)
			}
		}
		if !ok {
			if le != (LangError{}) {
				t.Fatalf("not ok but %+v", le)
			}
			return
		}
		if !known {
			t.Fatalf("format %q is no parser's, yet got %+v", format, le)
		}
		if le.Kind != contract.KindSyntax && le.Kind != contract.KindRuntime {
			t.Fatalf("kind %q", le.Kind)
		}
		if len(le.Message) > 500 || !utf8.ValidString(le.Message) || strings.Contains(le.Message, "\n") {
			t.Fatalf("message %q", le.Message)
		}
		if le.Line < 0 || le.Column < 0 || (le.Column > 0 && le.Line == 0) {
			t.Fatalf("position %d:%d", le.Line, le.Column)
		}
		if le.Line > 0 {
			// The line is read from stderr, at a location in the
			// submitted file.
			if !strings.Contains(stderr, codePath) {
				t.Fatalf("line %d, but stderr never names %s", le.Line, codePath)
			}
			if !strings.Contains(stderr, strconv.Itoa(le.Line)) {
				t.Fatalf("line %d is not in stderr", le.Line)
			}
		}
		switch format {
		case "python":
			if le.Kind == contract.KindSyntax && le.Type != "SyntaxError" && le.Type != "IndentationError" && le.Type != "TabError" {
				t.Fatalf("syntax error of type %q", le.Type)
			}
			if le.Column > 0 {
				// Python's columns are worked out from the code itself.
				lines := strings.Split(code, "\n")
				if le.Line > len(lines) {
					t.Fatalf("column %d on line %d of %d-line code", le.Column, le.Line, len(lines))
				}
				src := strings.TrimSuffix(lines[le.Line-1], "\r")
				if le.Column > utf8.RuneCountInString(src)+1 {
					t.Fatalf("column %d past the end of line %d %q", le.Column, le.Line, src)
				}
			}
		case "node":
			if le.Kind == contract.KindSyntax && le.Type != "SyntaxError" {
				t.Fatalf("syntax error of type %q", le.Type)
			}
		case "bash":
			if le.Type != "" || le.Column != 0 {
				t.Fatalf("bash error with type %q, column %d", le.Type, le.Column)
			}
		}
	})
}
