package langerr

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"
)

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
func parsePython(lines []string, codePath, code string) (Error, bool) {
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
		return Error{}, false
	}
	r := done
	le := Error{Kind: contract.KindRuntime, Type: r.excType, Message: r.message, Line: r.userLine, Column: r.userColumn}
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
