package sandbox

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// LangError is what an interpreter's own error report says about a failed
// run.
type LangError struct {
	// Kind is KindSyntax or KindRuntime.
	Kind string
	// Type is the language's own name for the error (ZeroDivisionError,
	// ReferenceError); empty where the language has none (bash).
	Type string
	// Message is the language's message, one line.
	Message string
	// Line and Column are 1-based, in the submitted code; 0 when unknown
	// or when the error is not located in the submitted code.
	Line, Column int
}

// parseWindow bounds how much of stderr the parsers read: error reports
// sit at the end, and stderr can be a megabyte of noise before them.
const parseWindow = 64 << 10

// ParseLangError reads the stderr of a failed run. format is the manifest's
// error_format (python, node, bash); codePath is where the code ran from;
// code is the submitted source, for columns. ok is false when stderr holds
// no recognisable error report.
func ParseLangError(format, stderr, codePath, code string) (LangError, bool) {
	lines := tailLines(stderr, parseWindow)
	switch format {
	case "python":
		return parsePython(lines, codePath, code)
	case "node":
		return parseNode(lines, codePath)
	case "bash":
		return parseBash(lines, codePath)
	}
	return LangError{}, false
}

// tailLines splits the last max bytes of s into lines, starting at a line
// boundary.
func tailLines(s string, max int) []string {
	if len(s) > max {
		s = s[len(s)-max:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
}

var (
	pyFrameRe = regexp.MustCompile(`^  File "(.*)", line (\d+)(, in .*)?$`)
	// An exception line: a (possibly dotted) name, then ": message" or
	// nothing (KeyboardInterrupt, StopIteration).
	pyExcRe = regexp.MustCompile(`^([A-Za-z_][\w.]*)(?:: (.*))?$`)
)

var pySyntaxTypes = map[string]bool{"SyntaxError": true, "IndentationError": true, "TabError": true}

func parsePython(lines []string, codePath, code string) (LangError, bool) {
	// The report ends at the last frame line: what follows it is the
	// source line, markers, and then the exception line. Chained
	// exceptions print several reports; the last one is what ended the
	// program.
	last := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if pyFrameRe.MatchString(lines[i]) {
			last = i
			break
		}
	}
	if last < 0 {
		return LangError{}, false
	}
	exc := -1
	for i := last + 1; i < len(lines); i++ {
		if lines[i] != "" && !strings.HasPrefix(lines[i], " ") {
			exc = i
			break
		}
	}
	if exc < 0 {
		return LangError{}, false
	}
	m := pyExcRe.FindStringSubmatch(lines[exc])
	if m == nil {
		return LangError{}, false
	}
	le := LangError{Kind: KindRuntime, Type: m[1], Message: strings.TrimSpace(m[2])}

	// The frames of this report: back from the last frame to its header.
	start := last
	for start > 0 && lines[start-1] != "" && !strings.HasPrefix(lines[start-1], "Traceback ") && !pyExcRe.MatchString(lines[start-1]) {
		start--
	}
	lastFile, lastLine := "", 0
	for i := start; i <= last; i++ {
		f := pyFrameRe.FindStringSubmatch(lines[i])
		if f == nil {
			continue
		}
		n, _ := strconv.Atoi(f[2])
		lastFile, lastLine = f[1], n
		if f[1] == codePath {
			le.Line = n
		}
	}
	if pySyntaxTypes[le.Type] && lastFile == codePath {
		le.Kind = KindSyntax
		le.Line = lastLine
		le.Column = pyCaretColumn(lines[last+1:exc], code, lastLine)
	}
	return le, true
}

// pyCaretColumn finds the caret under the quoted source line. Python shows
// the line stripped of its indentation and indented by 4 spaces; the
// original indentation comes from the code itself.
func pyCaretColumn(between []string, code string, line int) int {
	for _, l := range between {
		if strings.TrimSpace(l) == "" || strings.Trim(l, " ^~") != "" || !strings.Contains(l, "^") {
			continue
		}
		caret := strings.IndexByte(l, '^') - 4
		if caret < 0 {
			return 0
		}
		src := lineOf(code, line)
		indent := len(src) - len(strings.TrimLeft(src, " \t"))
		return utf8.RuneCountInString(src[:min(len(src), indent)]) + caret + 1
	}
	return 0
}

func lineOf(code string, n int) string {
	for i := 1; i < n; i++ {
		j := strings.IndexByte(code, '\n')
		if j < 0 {
			return ""
		}
		code = code[j+1:]
	}
	if j := strings.IndexByte(code, '\n'); j >= 0 {
		code = code[:j]
	}
	return code
}

var (
	// "/workspace/main.js:3" heads an uncaught exception's report.
	// Node 18 writes "undefined:1" for code it did not load from a file.
	nodeHeaderRe = regexp.MustCompile(`^(\S+):(\d+)$`)
	// "TypeError: msg", "Oops [Error]: msg", "Error [ERR_X]: msg",
	// and Node 18's "[UnhandledPromiseRejection: msg]".
	nodeErrRe   = regexp.MustCompile(`^\[?([A-Za-z_$][\w$]*)(?: \[[\w$]+\])?: (.*?)\]?(?: \{)?$`)
	nodeFrameRe = regexp.MustCompile(`^\s+at (?:.*\()?(.+?):(\d+):(\d+)\)?(?: \{)?$`)
)

func parseNode(lines []string, codePath string) (LangError, bool) {
	// The last report header in stderr; console output before it is
	// the program's own.
	header := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if nodeHeaderRe.MatchString(lines[i]) {
			header = i
			break
		}
	}
	if header < 0 {
		return LangError{}, false
	}
	h := nodeHeaderRe.FindStringSubmatch(lines[header])
	headerFile := h[1]
	headerLine, _ := strconv.Atoi(h[2])
	caretCol := 0
	i := header + 1
	// The quoted source line and the caret under it.
	if i < len(lines) {
		i++
	}
	if i < len(lines) && strings.Trim(lines[i], " ^") == "" && strings.Contains(lines[i], "^") {
		caretCol = strings.IndexByte(lines[i], '^') + 1
		i++
	}
	for i < len(lines) && lines[i] == "" {
		i++
	}
	if i >= len(lines) {
		return LangError{}, false
	}
	le := LangError{Kind: KindRuntime}
	m := nodeErrRe.FindStringSubmatch(lines[i])
	if m == nil {
		// A thrown non-Error value: node prints it as it is.
		le.Message = strings.TrimSpace(lines[i])
		if headerFile == codePath {
			le.Line, le.Column = headerLine, caretCol
		}
		return le, le.Message != ""
	}
	le.Type, le.Message = m[1], m[2]
	// Frames follow the message, sometimes after lines of their own
	// ("Require stack:"); the report ends where the frames stop.
	inCode, inFrames := false, false
	for _, l := range lines[i+1:] {
		f := nodeFrameRe.FindStringSubmatch(l)
		if f == nil {
			if inFrames {
				break
			}
			continue
		}
		inFrames = true
		if f[1] == codePath {
			le.Line, _ = strconv.Atoi(f[2])
			le.Column, _ = strconv.Atoi(f[3])
			inCode = true
			break
		}
	}
	// A compile error names the file in its header and has no frame in
	// the user's code; a SyntaxError thrown at run time (JSON.parse) has.
	if le.Type == "SyntaxError" && headerFile == codePath && !inCode {
		le.Kind = KindSyntax
		le.Line, le.Column = headerLine, caretCol
	}
	return le, true
}

var bashLineRe = regexp.MustCompile(`^(.+?): line (\d+): (.*)$`)

func parseBash(lines []string, codePath string) (LangError, bool) {
	var runtime, syntax *LangError
	for _, l := range lines {
		m := bashLineRe.FindStringSubmatch(l)
		if m == nil || m[1] != codePath {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		le := LangError{Kind: KindRuntime, Line: n, Message: strings.TrimSpace(m[3])}
		if strings.HasPrefix(le.Message, "syntax error") {
			if syntax == nil {
				le.Kind = KindSyntax
				syntax = &le
			}
			continue
		}
		runtime = &le
	}
	switch {
	case syntax != nil:
		return *syntax, true
	case runtime != nil:
		return *runtime, true
	}
	return LangError{}, false
}

// resourcePatterns are messages that mean a limit of the box was hit,
// whatever the language printed them.
var resourcePatterns = []struct {
	limit string
	text  string
}{
	{LimitDisk, "No space left on device"},
	{LimitDisk, "ENOSPC"},
	{LimitDisk, "File too large"},
	{LimitDisk, "Disk quota exceeded"},
	{LimitOpenFiles, "Too many open files"},
	{LimitOpenFiles, "EMFILE"},
	{LimitPids, "fork: retry: Resource temporarily unavailable"},
	{LimitPids, "fork: Resource temporarily unavailable"},
	{LimitPids, "BlockingIOError: [Errno 11]"},
	{LimitPids, "can't start new thread"},
	{LimitPids, "uv_thread_create"},
	{LimitPids, "pthread_create"},
}

// nodeSpawnAgain is how Node reports a failed spawn: "spawn sleep EAGAIN".
var nodeSpawnAgain = regexp.MustCompile(`spawn \S* ?EAGAIN`)

// ResourceHint names the limit that stderr says was hit ("disk",
// "open_files", "pids"), or "". Where several appear, the last one wins:
// it is the one the program died of.
func ResourceHint(stderr string) string {
	window := stderr[max(0, len(stderr)-parseWindow):]
	best, at := "", -1
	for _, p := range resourcePatterns {
		if i := strings.LastIndex(window, p.text); i > at {
			best, at = p.limit, i
		}
	}
	if locs := nodeSpawnAgain.FindAllStringIndex(window, -1); len(locs) > 0 && locs[len(locs)-1][0] > at {
		best = LimitPids
	}
	return best
}
