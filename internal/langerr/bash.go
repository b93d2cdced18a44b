package langerr

import (
	"strconv"
	"strings"

	"github.com/runbox-mcp/runbox/contract"
)

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
func parseBash(lines []string, codePath string) (Error, bool) {
	var last *bashDiag
	for _, l := range lines {
		d, ok := parseBashDiag(l)
		if !ok {
			continue
		}
		if d.script == codePath && d.builtin == "" && bashSyntaxMessage(d.message) {
			return Error{Kind: contract.KindSyntax, Line: d.line, Message: d.message}, true
		}
		if d.script == codePath || bashScriptName(d.script) {
			last = &d
		}
	}
	if last == nil || last.script != codePath {
		return Error{}, false
	}
	if last.builtin != "" {
		// eval counts lines in its own text: no line of the script.
		return Error{Kind: contract.KindRuntime, Message: last.builtin + ": " + last.message}, true
	}
	return Error{Kind: contract.KindRuntime, Line: last.line, Message: last.message}, true
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
