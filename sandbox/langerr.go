package sandbox

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"
)

// LangError is what an interpreter's own error report says about a failed
// run.
type LangError struct {
	// Kind is contract.KindSyntax when the submitted code could not be parsed, and
	// KindRuntime for everything raised while it ran (a syntax error in
	// another file it imported or in a string it evaluated is runtime).
	Kind contract.Kind
	// Type is the language's own name for the error, as printed:
	// ZeroDivisionError, json.decoder.JSONDecodeError, ReferenceError.
	// Empty for bash, and for a thrown JavaScript value that is no Error.
	Type string
	// Message is the language's message: one line, trimmed, at most
	// 500 bytes, valid UTF-8.
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

// ParseLangError reads the stderr of a failed run. parser is "python",
// "node" or "bash" (the manifest's error_format); codePath is the path the
// code was run from, e.g. "/workspace/main.py"; code is the submitted
// source, which turns the interpreters' offsets into columns. ok is false
// when stderr holds no recognisable error report, e.g. after sys.exit(3)
// or a command's own complaint in a bash script.
//
// The whole of stderr is read, in time linear in its size: a report can be
// followed by more output (a child still writing, a megabyte of properties
// on a Node error), and a truncation marker may have cut the report's head.
func ParseLangError(parser, stderr, codePath, code string) (LangError, bool) {
	lines := strings.Split(stderr, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	var le LangError
	var ok bool
	switch parser {
	case "python":
		le, ok = parsePython(lines, codePath, code)
	case "node":
		le, ok = parseNode(lines, codePath, code)
	case "bash":
		le, ok = parseBash(lines, codePath)
	}
	if !ok {
		return LangError{}, false
	}
	le.Message = langMessage(le.Message)
	return le, true
}

// langMessage keeps the first line, trimmed, valid UTF-8, at most 500
// bytes: messages go into a JSON result an agent reads, and some
// languages put whole documents in them.
func langMessage(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 500 {
		cut := 500
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = strings.TrimRight(s[:cut], " \t")
	}
	return s
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

// ---- Python ----------------------------------------------------------

var (
	// A traceback frame: `  File "/workspace/main.py", line 3, in f`.
	// Frames of a SyntaxError have no ", in ...": they locate the error
	// in the file that failed to parse.
	pyFrameRe = regexp.MustCompile(`^  File "(.+)", line (\d+)(, in .*)?$`)
	// The exception line closing a report: a class name, dotted when the
	// class is not a builtin or from __main__ (json.decoder.JSONDecodeError),
	// then ": message", or nothing (StopIteration, KeyboardInterrupt).
	pyExceptionRe = regexp.MustCompile(`^([A-Za-z_][\w.]*)(?:: (.*))?$`)
)

const (
	pyTracebackHeader = "Traceback (most recent call last):"
	pyGroupHeader     = "  + Exception Group Traceback (most recent call last):"
	// pyGroupPrefix starts every line of an exception group's own
	// traceback; its sub-exceptions are indented further.
	pyGroupPrefix = "  | "
)

// pySyntaxTypes are the exceptions the compiler raises.
var pySyntaxTypes = map[string]bool{"SyntaxError": true, "IndentationError": true, "TabError": true}

// pyReport is one traceback as it is read.
type pyReport struct {
	group bool // an exception group: its lines start with pyGroupPrefix

	lastFile     string // the innermost frame
	lastLine     int
	lastIsSyntax bool // the innermost frame is a compiler's (no ", in")
	userLine     int  // the innermost frame in the submitted file
	userColumn   int

	// After the innermost frame: the source line Python quotes, and the
	// offset of the first caret under it (-1 when none).
	source    string
	hasSource bool
	caret     int

	excType, message string
}

// parsePython finds the last complete report in stderr: chained exceptions
// print one traceback per exception, and the last is the one that ended
// the program. A report starts at "Traceback (most recent call last):", at
// an exception group's header, or at a bare frame line (a SyntaxError in
// the main file has no header; truncation may have cut it), and ends at the
// first line that is not indented: the exception line.
func parsePython(lines []string, codePath, code string) (LangError, bool) {
	var cur, done *pyReport
	for _, l := range lines {
		if cur != nil {
			switch cur.feed(l, codePath, code) {
			case pyMore:
				continue
			case pyComplete:
				done, cur = cur, nil
				continue
			case pyAbandon:
				cur = nil // and see whether this line starts another report
			}
		}
		switch {
		case l == pyTracebackHeader:
			cur = &pyReport{caret: -1}
		case l == pyGroupHeader:
			cur = &pyReport{caret: -1, group: true}
		case strings.HasPrefix(l, "  File "):
			if m := pyFrameRe.FindStringSubmatch(l); m != nil {
				cur = &pyReport{caret: -1}
				cur.addFrame(m, codePath)
			}
		}
	}
	if done == nil {
		return LangError{}, false
	}
	r := done
	le := LangError{Kind: contract.KindRuntime, Type: r.excType, Message: r.message, Line: r.userLine, Column: r.userColumn}
	if pySyntaxTypes[r.excType] && r.lastIsSyntax && r.lastFile == codePath {
		le.Kind = contract.KindSyntax
		le.Line, le.Column = r.lastLine, 0
		if r.hasSource && r.caret >= 0 {
			// The compiler's caret is a byte offset into the quoted line
			// (Python 3.11 prints "é" as one column but counts it as two).
			le.Column = pyColumn(code, r.lastLine, r.source, r.caret, true)
		}
	}
	return le, true
}

// What a line does to the report being read.
const (
	pyMore     = iota // the report goes on
	pyComplete        // the line was the exception line: the report is whole
	pyAbandon         // the line cannot be part of a report: it was no traceback
)

func (r *pyReport) feed(l, codePath, code string) int {
	if isTruncationMarker(l) {
		return pyMore // part of the traceback is gone; read on
	}
	if r.group {
		if !strings.HasPrefix(l, pyGroupPrefix) {
			return pyAbandon // the group's own traceback ended without its exception line
		}
		l = l[len(pyGroupPrefix):]
	}
	switch {
	case strings.HasPrefix(l, "  File "):
		if m := pyFrameRe.FindStringSubmatch(l); m != nil {
			r.addFrame(m, codePath)
		}
		return pyMore
	case strings.HasPrefix(l, " "):
		r.addDetail(l, codePath, code)
		return pyMore
	case l == "":
		return pyAbandon // a traceback has no blank line before its exception line
	}
	m := pyExceptionRe.FindStringSubmatch(l)
	if m == nil || r.lastFile == "" {
		return pyAbandon
	}
	r.excType, r.message = m[1], m[2]
	return pyComplete
}

func (r *pyReport) addFrame(m []string, codePath string) {
	n, err := strconv.Atoi(m[2])
	if err != nil {
		n = 0
	}
	r.lastFile, r.lastLine, r.lastIsSyntax = m[1], n, m[3] == ""
	r.source, r.hasSource, r.caret = "", false, -1
	if m[1] == codePath {
		r.userLine, r.userColumn = n, 0
	}
}

// addDetail reads an indented line under a frame: the quoted source line
// (4 spaces, then the line stripped of its indentation), then Python
// 3.11's markers under it (`^^^^`, `~~^~~`) or a compiler's caret. Other
// lines ("[Previous line repeated 996 more times]") say nothing we need.
func (r *pyReport) addDetail(l, codePath, code string) {
	if r.lastFile == "" || !strings.HasPrefix(l, "    ") {
		return
	}
	text := l[4:]
	if !r.hasSource {
		r.source, r.hasSource = text, true
		return
	}
	if r.caret >= 0 || strings.Trim(text, " ~^") != "" {
		return
	}
	i := strings.IndexByte(text, '^')
	if i < 0 {
		return
	}
	r.caret = i
	if !r.lastIsSyntax && r.lastFile == codePath {
		// Runtime markers count characters: the traceback printer
		// converts the compiler's byte offsets before it lays them out.
		r.userColumn = pyColumn(code, r.lastLine, r.source, i, false)
	}
}

// pyColumn turns an offset into the line Python quoted, which it strips of
// its indentation, into a 1-based column of the submitted line. It
// returns 0 when the quoted line is not that line of code (an f-string's
// SyntaxError quotes the expression, not the line) or the code is unknown.
func pyColumn(code string, lineNo int, quoted string, offset int, bytes bool) int {
	orig, ok := sourceLine(code, lineNo)
	if !ok {
		return 0
	}
	stripped := strings.TrimLeft(orig, " \t\f")
	if strings.TrimRight(stripped, " \t\f") != strings.TrimRight(quoted, " \t\f") {
		return 0
	}
	indent := utf8.RuneCountInString(orig[:len(orig)-len(stripped)])
	if !bytes {
		return indent + min(offset, utf8.RuneCountInString(stripped)) + 1
	}
	offset = min(offset, len(stripped))
	for offset > 0 && offset < len(stripped) && !utf8.RuneStart(stripped[offset]) {
		offset--
	}
	return indent + utf8.RuneCountInString(stripped[:offset]) + 1
}

// ---- Node ------------------------------------------------------------

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
func parseNode(lines []string, codePath, code string) (LangError, bool) {
	rep, ok := lastNodeHeader(lines)
	if !ok {
		i := lastNodeStack(lines)
		if i < 0 {
			return LangError{}, false
		}
		rep = nodeReport{errorLine: i}
	}
	le := LangError{Kind: contract.KindRuntime}
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

// ---- bash ------------------------------------------------------------

// bashDiag is one "<script>: line N: message" diagnostic.
type bashDiag struct {
	script  string // the script's name as bash knows it ($0 or a sourced file)
	builtin string // "eval" in "<script>: eval: line N: message"
	line    int
	message string
}

// parseBash reads bash's own diagnostics. A syntax error in the submitted
// script (from bash -n or from the run) wins: nothing after it ran. Else
// the last diagnostic tells why the script failed, if it was the submitted
// script's own; when the last one is another script's (a sourced helper,
// a child bash) or when no line has bash's form (ls printing its own
// complaint), there is nothing to say beyond the exit status.
func parseBash(lines []string, codePath string) (LangError, bool) {
	var last *bashDiag
	for _, l := range lines {
		d, ok := parseBashDiag(l)
		if !ok {
			continue
		}
		if d.script == codePath && d.builtin == "" && bashSyntaxMessage(d.message) {
			return LangError{Kind: contract.KindSyntax, Line: d.line, Message: d.message}, true
		}
		if d.script == codePath || bashScriptName(d.script) {
			last = &d
		}
	}
	if last == nil || last.script != codePath {
		return LangError{}, false
	}
	if last.builtin != "" {
		// eval counts lines in its own text: no line of the script.
		return LangError{Kind: contract.KindRuntime, Message: last.builtin + ": " + last.message}, true
	}
	return LangError{Kind: contract.KindRuntime, Line: last.line, Message: last.message}, true
}

// parseBashDiag parses "<script>: line N: message" and
// "<script>: eval: line N: message". Warnings ("warning: here-document at
// line 3 delimited by end-of-file") are no errors and are skipped.
func parseBashDiag(l string) (bashDiag, bool) {
	i := strings.Index(l, ": line ")
	if i <= 0 {
		return bashDiag{}, false
	}
	rest := l[i+len(": line "):]
	j := strings.Index(rest, ": ")
	if j <= 0 {
		return bashDiag{}, false
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil || n < 0 || rest[0] == '+' || rest[0] == '-' {
		return bashDiag{}, false
	}
	d := bashDiag{script: l[:i], line: n, message: strings.TrimSpace(rest[j+2:])}
	if k := strings.LastIndex(d.script, ": "); k > 0 {
		d.script, d.builtin = d.script[:k], d.script[k+2:]
	}
	if strings.HasPrefix(d.message, "warning: ") {
		return bashDiag{}, false
	}
	return d, true
}

// bashScriptName tells a script's name from a word that other programs put
// before ": line N:" ("yaml: line 3: mapping values are not allowed").
func bashScriptName(s string) bool {
	return strings.Contains(s, "/") || strings.HasSuffix(s, ".sh") || strings.HasSuffix(s, ".bash") || s == "bash" || s == "sh"
}

// bashSyntaxMessage recognises the parser's errors. Run-time errors can say
// "syntax error" too, after the text they failed on: arithmetic
// ("1 + : syntax error: operand expected") is one.
func bashSyntaxMessage(m string) bool {
	for _, p := range []string{"syntax error", "unexpected EOF", "unexpected token", "unexpected argument", "conditional binary operator expected"} {
		if strings.HasPrefix(m, p) {
			return true
		}
	}
	return false
}

// ---- resource limits -------------------------------------------------

// resourceSign is a message that means a limit of the box was hit.
type resourceSign struct {
	limit  contract.Limit
	needle string
	// valid, when set, checks the match at stderr[at:]: some messages
	// mean a limit only in some contexts.
	valid func(stderr string, at int) bool
}

var resourceSigns = []resourceSign{
	{contract.LimitDisk, "No space left on device", nil},
	{contract.LimitDisk, "ENOSPC", notFileWatchers},
	{contract.LimitDisk, "Disk quota exceeded", nil},
	{contract.LimitDisk, "EDQUOT", nil},
	{contract.LimitDisk, "File too large", nil},
	{contract.LimitDisk, "EFBIG", nil},
	{contract.LimitDisk, "File size limit exceeded", nil}, // bash, of a child killed by SIGXFSZ
	{contract.LimitOpenFiles, "Too many open files", nil}, // "... in system" (ENFILE) too
	{contract.LimitOpenFiles, "too many open files", nil}, // Node: "EMFILE: too many open files, open 'x'"
	{contract.LimitOpenFiles, "EMFILE", nil},
	{contract.LimitOpenFiles, "ENFILE", nil},
	// bash: "main.sh: fork: retry: Resource temporarily unavailable",
	// then "main.sh: fork: Resource temporarily unavailable".
	{contract.LimitPids, "fork: retry: Resource temporarily unavailable", nil},
	{contract.LimitPids, "fork: Resource temporarily unavailable", nil},
	// Python: os.fork, subprocess and multiprocessing raise
	// BlockingIOError [Errno 11]; so does a non-blocking read, which is
	// no limit.
	{contract.LimitPids, "BlockingIOError: [Errno 11]", afterProcessStart},
	{contract.LimitPids, "can't start new thread", nil},
	// Node: "Error: spawn sleep EAGAIN", "Error: spawnSync /bin/sh EAGAIN".
	{contract.LimitPids, "EAGAIN", afterSpawn},
	// Node's own threads at start: Node 18 "Assertion `(0) ==
	// (uv_thread_create(...))' failed", Node 20 "Assertion failed: (0) ==
	// (uv_thread_create(...))".
	{contract.LimitPids, "uv_thread_create", nil},
	// "node[7]: pthread_create: Resource temporarily unavailable", OpenBLAS
	// "pthread_create failed for thread 1 of 4: Resource temporarily
	// unavailable".
	{contract.LimitPids, "pthread_create", beforeEAGAIN},
}

// ResourceHint recognises messages that mean a resource limit was hit
// inside the box, whatever the language printed them: it returns "disk"
// (no space left, file too large), "open_files" (too many open files),
// "pids" (no process or thread could be started), or "" when none. When
// several appear, the last one wins: it is the one closest to the failure.
func ResourceHint(stderr string) contract.Limit {
	var hint contract.Limit
	best := -1
	for _, s := range resourceSigns {
		// Look at the last few occurrences only: a sign that does not
		// count a hundred times over is noise, and stderr can be a MiB
		// of it.
		end := len(stderr)
		for tries := 0; tries < 100; tries++ {
			i := strings.LastIndex(stderr[:end], s.needle)
			if i <= best {
				break
			}
			if s.valid == nil || s.valid(stderr, i) {
				hint, best = s.limit, i
				break
			}
			end = i
		}
	}
	return hint
}

// sameLine returns up to max bytes of the line around stderr[at], before
// and after at.
func sameLine(stderr string, at, max int) (before, after string) {
	before = stderr[:at]
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	before = before[len(before)-min(len(before), max):]
	after = stderr[at:min(len(stderr), at+max)]
	if i := strings.IndexByte(after, '\n'); i >= 0 {
		after = after[:i]
	}
	return before, after
}

// notFileWatchers rejects Node's "ENOSPC: System limit for number of file
// watchers reached", which is about inotify, not disk space.
func notFileWatchers(stderr string, at int) bool {
	_, after := sameLine(stderr, at, 200)
	return !strings.Contains(after, "file watchers")
}

// afterSpawn accepts EAGAIN where Node failed to start a process.
func afterSpawn(stderr string, at int) bool {
	before, _ := sameLine(stderr, at, 300)
	return strings.Contains(before, "spawn")
}

// beforeEAGAIN accepts pthread_create where the line says it failed for
// want of resources.
func beforeEAGAIN(stderr string, at int) bool {
	_, after := sameLine(stderr, at, 200)
	return strings.Contains(after, "Resource temporarily unavailable")
}

// afterProcessStart checks that the traceback before a BlockingIOError is
// about forking or spawning, in its last few kilobytes.
func afterProcessStart(stderr string, at int) bool {
	before := stderr[max(0, at-4096):at]
	if i := strings.LastIndex(before, pyTracebackHeader); i >= 0 {
		before = before[i:]
	}
	for _, w := range []string{"fork", "subprocess", "spawn", "Popen", "multiprocessing"} {
		if strings.Contains(before, w) {
			return true
		}
	}
	return false
}

// HeapExhausted says whether a Node program died of V8's heap limit.
func HeapExhausted(format, stderr string) bool {
	return format == "node" && strings.Contains(stderr, "JavaScript heap out of memory")
}
