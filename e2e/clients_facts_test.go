package e2e

// The facts a model must be able to read in a tool result, checked on
// exactly what an agent client handed its model (clients_test.go). Pure:
// no Docker, no client; it runs in `make unit` with its own table test.
//
// runbox renders a result twice, as the JSON of structuredContent and as a
// text summary, and a client hands its model one, the other or both; every
// fact accepts either form.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// seenResult is what a client put in its model request as one tool
// result: its text parts in order and how many images.
type seenResult struct {
	Texts  []string
	Images int
}

// Text is the text parts, concatenated in order (one newline between).
func (s seenResult) Text() string { return strings.Join(s.Texts, "\n") }

// fact is one thing the model must be able to read.
type fact struct {
	Name string
	Ok   func(s seenResult, text string) bool
}

// flat is the text with up to two levels of JSON string escaping undone, so
// that structuredContent nested in a client's own JSON reads like the
// summary (a client may hand over JSON.stringify of a JSON string).
func flat(s string) string {
	r := strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n", `\t`, "\t", `\u003c`, "<", `\u003e`, ">", `\u0026`, "&")
	for range 2 {
		s = r.Replace(s)
	}
	return s
}

func hasMatch(re string) func(seenResult, string) bool {
	x := regexp.MustCompile(re)
	return func(_ seenResult, text string) bool { return x.MatchString(text) }
}

func hasText(sub string) func(seenResult, string) bool {
	return func(_ seenResult, text string) bool { return strings.Contains(text, sub) }
}

// Facts of a run result, each in its JSON and its summary form.

func factStatus(status string) fact {
	return fact{"status " + status, hasMatch(`"status":\s*"` + status + `"|(?m)(^|\W)` + status + ` · (python|javascript|typescript|bash)`)}
}

func factExit(code int) fact {
	c := strconv.Itoa(code)
	return fact{"exit code " + c, hasMatch(`"exit_code":\s*` + c + `\b|· exit ` + c + `\b`)}
}

func factKind(kind string) fact {
	return fact{"error kind " + kind, hasMatch(`"kind":\s*"` + kind + `"|(?m)^error: ` + kind + `\b`)}
}

func factLine(line int) fact {
	l := strconv.Itoa(line)
	return fact{"error line " + l, hasMatch(`"line":\s*` + l + `\b|at line ` + l + `\b`)}
}

var factHint = fact{"a hint", hasMatch(`"hint":\s*"[^"]{10,}|(?m)^hint: \S{2,}`)}

func factText(name, sub string) fact { return fact{name + " " + strconv.Quote(sub), hasText(sub)} }

// factStream is a stream of the run (stdout or stderr, whole output want)
// either handed over whole, or cut with the cut said and the resource of
// the full stream named, runbox://runs/<run_id>/<stream>. The cut may be
// said in any words (the summary's wording is the lead's to choose): the
// JSON flag, or "truncated", "cut", "omitted", "elided".
func factStream(stream, want string) fact {
	cut := regexp.MustCompile(`"` + stream + `_truncated":\s*true|(?i)truncat|\bcut\b|omitted|elided`)
	uri := regexp.MustCompile(`runbox://runs/r_[0-9A-Za-z]+/` + stream + `\b`)
	return fact{stream + " whole, or cut and its resource named", func(_ seenResult, text string) bool {
		if strings.Contains(text, want) {
			return true
		}
		return cut.MatchString(text) && uri.MatchString(text)
	}}
}

func factImages(n int) fact {
	return fact{fmt.Sprintf("%d image part(s)", n), func(s seenResult, _ string) bool { return s.Images >= n }}
}

func factSession(state string) fact {
	return fact{"session state " + state, hasMatch(`"state":\s*"` + state + `"|(?m)session s_[0-9A-Za-z_-]+ .*\b` + state + `\b`)}
}

// missingFacts returns the names of the facts s lacks.
func missingFacts(s seenResult, facts []fact) []string {
	text := flat(s.Text())
	var missing []string
	for _, f := range facts {
		if !f.Ok(s, text) {
			missing = append(missing, f.Name)
		}
	}
	return missing
}
