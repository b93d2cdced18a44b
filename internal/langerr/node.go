package langerr

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/runbox-mcp/runbox/contract"
)

var (
	// The line a thrown Error's stack starts with: "TypeError: msg",
	// "Error" (no message), "Oops [Error]: msg" (a subclass without its
	// own name), "TypeError [ERR_INVALID_ARG_TYPE]: msg" (a Node code),
	// "Error [Fatal Error]: msg" (a name set after the stack was made).
	nodeErrorRe = regexp.MustCompile(`^([A-Za-z_$][\w$]*)(?: \[[^\]]+\])?(?:: (.*))?$`)
	// An Error printed by util.inspect without a stack:
	// "[UnhandledPromiseRejection: msg] {" (Node 18),
	// "[AggregateError: All promises were rejected] {".
	nodeBracketRe = regexp.MustCompile(`^\[([A-Za-z_$][\w$]*)(?: \[[^\]]+\])?(?:: (.*?))?(?:\])?(?: \{)?$`)
)

// nodeReport is what an uncaught exception's report says.
type nodeReport struct {
	file       string // where the exception was thrown, from the header
	line       int
	column     int // from the caret under the quoted source line
	errorLine  int // index of the error's first line; -1 for a thrown value
	valueStart int // index of a thrown value's first line
}

// parseNode reads Node's report of an uncaught exception:
//
//	/workspace/main.js:3        where it was thrown
//	  return missing + 1;       the source line, verbatim
//	  ^                         a caret under the spot
//	                            a blank line, for Errors only
//	ReferenceError: missing is not defined
//	    at f (/workspace/main.js:3:3)
//
// A thrown value that is no Error (throw "x") is printed right under the
// caret, without a stack. When no such header survives (truncation), the
// last "Name: message" line followed by stack frames is read instead.
func parseNode(lines []string, codePath, code string) (Error, bool) {
	rep, ok := lastNodeHeader(lines)
	if !ok {
		i := lastNodeStack(lines)
		if i < 0 {
			return Error{}, false
		}
		rep = nodeReport{errorLine: i}
	}
	le := Error{Kind: contract.KindRuntime}
	if rep.errorLine < 0 {
		// A thrown string, number, object...: no type, no stack.
		le.Message = nodeThrownValue(lines[rep.valueStart:])
		if rep.file == codePath {
			le.Line, le.Column = rep.line, rep.column
		}
		return le, true
	}
	head := nodeStripPrefixes(lines[rep.errorLine])
	stackless := false
	if m := nodeBracketRe.FindStringSubmatch(head); m != nil {
		le.Type, le.Message, stackless = m[1], m[2], true
	} else if m := nodeErrorRe.FindStringSubmatch(head); m != nil {
		le.Type, le.Message = m[1], m[2]
	} else {
		le.Message = head // an Error whose stack was rewritten
	}
	inCode := false
	if !stackless {
		le.Line, le.Column, inCode = nodeFirstUserFrame(lines[rep.errorLine+1:], codePath, code)
	}
	// The stack says where the error was made, the header where it was
	// thrown: they differ for `const e = new Error(); ...; throw e`, and
	// then the throw is the line that failed. On the same line, the
	// stack's column is V8's own position of the error.
	if rep.file == codePath && (!inCode || rep.line != le.Line) {
		le.Line, le.Column = rep.line, rep.column
	}
	// A file that fails to compile is named in the header and has no
	// frame of its own in the stack; a SyntaxError thrown while running
	// (JSON.parse, eval, a require()d file) has a frame in the code.
	if le.Type == "SyntaxError" && rep.file == codePath && !inCode {
		le.Kind = contract.KindSyntax
	}
	return le, true
}

// lastNodeHeader finds the last "<file>:<line>" header that is followed by
// a source line, a caret line and an error or a value, reading backwards.
func lastNodeHeader(lines []string) (nodeReport, bool) {
	for i := len(lines) - 3; i >= 0; i-- {
		file, line, ok := nodeHeader(lines[i])
		if !ok || !nodeCaretLine(lines[i+2]) {
			continue
		}
		rep := nodeReport{file: file, line: line, errorLine: -1}
		caret := strings.IndexByte(lines[i+2], '^')
		if caret >= 0 {
			rep.column = utf16Column(lines[i+1], caret)
		}
		next := i + 3
		if next < len(lines) && isTruncationMarker(lines[next]) {
			continue // what followed the header is gone
		}
		if next < len(lines) && lines[next] != "" && caret >= 0 {
			rep.valueStart = next
			return rep, true
		}
		// An Error: after a blank line (two more when the source line
		// and caret are empty, as for "Unexpected end of input"). Without
		// a caret, the layout alone is too weak a sign: the error line
		// must look like one.
		for j := next; j < len(lines) && j <= next+3; j++ {
			if lines[j] == "" {
				continue
			}
			if isTruncationMarker(lines[j]) {
				break
			}
			if caret >= 0 && strings.HasPrefix(lines[j], "(Use `node ") {
				rep.valueStart = next // throw "": an empty value, then Node's advice
				return rep, true
			}
			head := nodeStripPrefixes(lines[j])
			if caret >= 0 || nodeErrorRe.MatchString(head) || nodeBracketRe.MatchString(head) {
				rep.errorLine = j
				return rep, true
			}
			break
		}
	}
	return nodeReport{}, false
}

// nodeHeader parses "/workspace/main.js:3", "node:internal/x:12",
// "file:///workspace/main.js:3" (an ES module) or "undefined:1" (code from
// a string, Node 18; "<anonymous_script>:1" in Node 20).
func nodeHeader(l string) (file string, line int, ok bool) {
	i := strings.LastIndexByte(l, ':')
	if i <= 0 || i == len(l)-1 || len(l)-i > 10 || l[0] == ' ' || l[0] == '\t' {
		return "", 0, false
	}
	n, err := strconv.Atoi(l[i+1:])
	if err != nil || n < 1 || l[i+1] == '+' {
		return "", 0, false
	}
	return nodeFile(l[:i]), n, true
}

// nodeCaretLine reports a line of spaces, tabs (copied from the source
// line to keep the alignment) and carets, or an empty one.
func nodeCaretLine(l string) bool {
	return strings.Trim(l, " \t^") == ""
}

// nodeFile maps an ES module's URL to its path.
func nodeFile(f string) string {
	return strings.TrimPrefix(f, "file://")
}

// nodeStripPrefixes removes "Uncaught " (the REPL's word) and "<ref *1> "
// (util.inspect's mark on an Error that refers to itself, as
// child_process errors do).
func nodeStripPrefixes(l string) string {
	l = strings.TrimPrefix(l, "Uncaught ")
	if strings.HasPrefix(l, "<ref *") {
		if i := strings.Index(l, "> "); i > 0 {
			l = l[i+2:]
		}
	}
	return l
}

// nodeThrownValue is the message for a thrown non-Error, printed by
// util.inspect: a string as it is (its first line), an object or array
// over several lines, joined into one.
func nodeThrownValue(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	first := strings.TrimSpace(lines[0])
	if !strings.HasPrefix(first, "{") && !strings.HasPrefix(first, "[") {
		return first
	}
	var b strings.Builder
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, "(Use `node ") || b.Len() > 1000 {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.TrimSpace(l))
	}
	return b.String()
}

// lastNodeStack finds, without a header, the last error line that a stack
// follows: the nearest "Name: message" line above the last run of frames.
func lastNodeStack(lines []string) int {
	run := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if nodeOwnFrame(lines[i]) && (i == 0 || !nodeOwnFrame(lines[i-1])) {
			run = i
			break
		}
	}
	for i := run - 1; i >= 0 && i >= run-10; i-- {
		if lines[i] == "" {
			break
		}
		if nodeErrorRe.MatchString(nodeStripPrefixes(lines[i])) {
			return i
		}
	}
	return -1
}

// nodeOwnFrame recognises a frame of the error's own stack: V8 indents them
// by 4 spaces; frames of errors nested in its properties ([cause],
// [errors]) are indented further.
func nodeOwnFrame(l string) bool {
	return strings.HasPrefix(l, "    at ")
}

// nodeFirstUserFrame reads the error's own stack frames, which follow its
// message (itself possibly several lines long), and returns the location of
// the first one in codePath: the innermost call in the submitted code.
func nodeFirstUserFrame(lines []string, codePath, code string) (line, col int, ok bool) {
	inStack := false
	for _, l := range lines {
		if !nodeOwnFrame(l) {
			if inStack && !strings.HasPrefix(l, "    ... ") && !isTruncationMarker(l) {
				return 0, 0, false // the stack ended: "Emitted 'error' event at:", " {", the end
			}
			if strings.HasPrefix(l, "Node.js v") {
				return 0, 0, false
			}
			continue
		}
		inStack = true
		file, n, c, fok := nodeFrameLocation(l)
		if !fok || file != codePath {
			continue
		}
		if src, sok := sourceLine(code, n); sok {
			c = utf16Column(src, c-1)
		}
		return n, c, true
	}
	return 0, 0, false
}

// nodeFrameLocation parses the location of a frame: "at f (file:3:5)",
// "at file:3:5", "at f (file:3:5) {" (properties follow) and, for code
// run by eval, "at eval (eval at f (file:2:1), <anonymous>:1:1)", where
// the location is the eval'd code's.
func nodeFrameLocation(l string) (file string, line, col int, ok bool) {
	loc := strings.TrimSpace(strings.TrimPrefix(l, "    at "))
	loc = strings.TrimSuffix(loc, " {")
	if strings.HasSuffix(loc, ")") {
		loc = loc[:len(loc)-1]
		if i := strings.LastIndex(loc, " ("); i >= 0 {
			loc = loc[i+2:]
		}
		if i := strings.LastIndex(loc, ", "); i >= 0 {
			loc = loc[i+2:]
		}
	}
	j := strings.LastIndexByte(loc, ':')
	if j <= 0 {
		return "", 0, 0, false
	}
	i := strings.LastIndexByte(loc[:j], ':')
	if i <= 0 {
		return "", 0, 0, false
	}
	line, err1 := strconv.Atoi(loc[i+1 : j])
	col, err2 := strconv.Atoi(loc[j+1:])
	if err1 != nil || err2 != nil || line < 1 || col < 1 {
		return "", 0, 0, false
	}
	return nodeFile(loc[:i]), line, col, true
}

// utf16Column turns a 0-based offset in UTF-16 code units, which is how V8
// counts columns and places its caret, into a 1-based column in code
// points of line.
func utf16Column(line string, units int) int {
	col, n := 0, 0
	for _, r := range line {
		if n >= units {
			break
		}
		n += max(1, utf16.RuneLen(r))
		col++
	}
	if n < units {
		col += units - n // past the end of the line
	}
	return col + 1
}
