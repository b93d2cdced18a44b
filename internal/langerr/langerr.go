package langerr

import (
	"strings"

	"github.com/runbox-mcp/runbox/contract"
)

// Error formats, as a language's error_format names them in the manifest.
const (
	formatPython = "python"
	formatNode   = "node"
	// formatTypeScript is Node running runbox's TypeScript runner: Node's
	// reports, and type errors in the shape of its syntax errors.
	formatTypeScript = "typescript"
	formatBash       = "bash"
)

// Error is what an interpreter's own error report says about a failed run.
type Error struct {
	// Kind is contract.KindSyntax when the submitted code could not be
	// parsed, and contract.KindRuntime for everything raised while it ran
	// (a syntax error in another file it imported or in a string it
	// evaluated is runtime).
	Kind contract.Kind
	// Type is the language's own name for the error, as printed:
	// ZeroDivisionError, json.decoder.JSONDecodeError, ReferenceError.
	// Empty for bash, and for a thrown JavaScript value that is no Error.
	Type string
	// Message is the language's message as [contract.FirstLine] keeps it: one
	// line, trimmed, valid UTF-8, at most 500 bytes.
	Message string
	// Line is the 1-based line in the submitted code: where a syntax
	// error is, or the last place in the submitted file that the failing
	// call went through. 0 when unknown or when no frame is in that file.
	Line int
	// Column is the 1-based column in Line, counted in characters (code
	// points) of the submitted code, where the language points at one;
	// else 0.
	Column int
}

// Parse reads the stderr of a failed run. format is "python", "node",
// "typescript" or "bash" (the manifest's error_format); codePath is the path the code was
// run from, e.g. "/workspace/main.py"; code is the submitted source, which
// turns the interpreters' offsets into columns. ok is false when stderr
// holds no recognisable error report, e.g. after sys.exit(3) or a command's
// own complaint in a bash script, and for any other format.
//
// The whole of stderr is read, in time linear in its size: a report can be
// followed by more output (a child still writing, a megabyte of properties
// on a Node error), and a truncation marker may have cut the report's head.
func Parse(format, stderr, codePath, code string) (e Error, ok bool) {
	lines := strings.Split(stderr, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	switch format {
	case formatPython:
		e, ok = parsePython(lines, codePath, code)
	case formatNode:
		e, ok = parseNode(lines, codePath, code)
	case formatTypeScript:
		e, ok = parseNode(lines, codePath, code)
		if ok && e.Kind == contract.KindRuntime && isTypeError(e.Type) && e.Line > 0 {
			// The compiler's report of the submitted code: nothing ran.
			e.Kind = contract.KindSyntax
		}
	case formatBash:
		e, ok = parseBash(lines, codePath)
	}
	if !ok {
		return Error{}, false
	}
	e.Message = contract.FirstLine(e.Message)
	return e, true
}

// isTypeError says whether typ is a TypeScript compiler diagnostic's
// code (TS2322), as the TypeScript runner names its type errors.
func isTypeError(typ string) bool {
	n, ok := strings.CutPrefix(typ, "TS")
	if !ok || n == "" || len(n) > 6 {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isTruncationMarker recognises the line runbox-init puts where it cut
// stderr ("…[runbox: N bytes truncated]…"): parsers step over it.
func isTruncationMarker(l string) bool {
	return strings.HasPrefix(l, "…[runbox: ") && strings.HasSuffix(l, " bytes truncated]…")
}

// sourceLine returns line n (1-based) of code without its line ending, and
// false when code has no such line.
func sourceLine(code string, n int) (string, bool) {
	if n < 1 {
		return "", false
	}
	for i := 1; i < n; i++ {
		j := strings.IndexByte(code, '\n')
		if j < 0 {
			return "", false
		}
		code = code[j+1:]
	}
	if code == "" {
		return "", false
	}
	if j := strings.IndexByte(code, '\n'); j >= 0 {
		code = code[:j]
	}
	return strings.TrimSuffix(code, "\r"), true
}
