package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestClientFacts: each fact is found in the JSON of structuredContent, in
// the text summary and in JSON a client nested it in, and missing where it
// is absent or cut away.
func TestClientFacts(t *testing.T) {
	big := "HEAD\n" + strings.Repeat("x", 100) + "\nTAIL\n"
	syntax := []fact{factStatus("error"), factExit(1), factKind("syntax"), factLine(3), factHint}
	for _, c := range []struct {
		name    string
		seen    seenResult
		facts   []fact
		missing []string
	}{
		{"structuredContent JSON", seenResult{Texts: []string{`{"run_id":"r_01","status":"error","exit_code":1,"error":{"kind":"syntax","message":"invalid syntax","line":3,"hint":"Fix the syntax at the line shown."}}`}},
			syntax, nil},
		{"text summary", seenResult{Texts: []string{"error · python · exit 1 · 41 ms · run r_01\nerror: syntax SyntaxError at line 3: invalid syntax\nhint: Fix the syntax at the line shown."}},
			syntax, nil},
		{"JSON nested in a client's JSON", seenResult{Texts: []string{`{"output":"{\"status\":\"error\",\"exit_code\":1,\"error\":{\"kind\":\"syntax\",\"line\":3,\"hint\":\"Fix the syntax here.\"}}"}`}},
			syntax, nil},
		{"another line and kind", seenResult{Texts: []string{"error · python · exit 1 · 41 ms · run r_01\nerror: runtime ValueError at line 13: no\nhint: x"}},
			syntax, []string{"error kind syntax", "error line 3", "a hint"}},
		{"ok is not error", seenResult{Texts: []string{`{"status":"ok","exit_code":0}`}},
			[]fact{factStatus("error"), factExit(1)}, []string{"status error", "exit code 1"}},
		{"exit 10 is not exit 1", seenResult{Texts: []string{"error · python · exit 10 · 41 ms · run r_01"}},
			[]fact{factExit(1)}, []string{"exit code 1"}},
		{"stream whole, in JSON", seenResult{Texts: []string{`{"stdout":"HEAD\n` + strings.Repeat("x", 100) + `\nTAIL\n"}`}},
			[]fact{factStream("stdout", big)}, nil},
		{"stream cut, said and located", seenResult{Texts: []string{"--- stdout (truncated: 60000 chars, all of it at runbox://runs/r_01ABC/stdout) ---\nHEAD\nxx\nTAIL"}},
			[]fact{factStream("stdout", big), factText("head", "HEAD"), factText("tail", "TAIL")}, nil},
		{"stream cut by the client, unsaid", seenResult{Texts: []string{`{"stdout":"HEAD\nxxxx… [output truncated, see /tmp/x.txt]`}},
			[]fact{factStream("stdout", big), factText("tail", "TAIL")}, []string{"stdout whole, or cut and its resource named", "tail \"TAIL\""}},
		{"cut in other words, located", seenResult{Texts: []string{"ok · python · exit 0 · 3 ms · run r_01\nstdout: 60,000 chars, the middle 52,000 cut; all of it: runbox://runs/r_01ABC/stdout\nHEAD\nxx\nTAIL"}},
			[]fact{factStream("stdout", big)}, nil},
		{"the resource of the other stream", seenResult{Texts: []string{`{"stdout":"HEAD\nxx\nTAIL","stdout_truncated":true,"stderr_uri":"runbox://runs/r_01ABC/stderr"}`}},
			[]fact{factStream("stdout", big)}, []string{"stdout whole, or cut and its resource named"}},
		{"cut said but no resource", seenResult{Texts: []string{`{"stdout":"HEAD\nxx\nTAIL","stdout_truncated":true}`}},
			[]fact{factStream("stdout", big)}, []string{"stdout whole, or cut and its resource named"}},
		{"images", seenResult{Texts: []string{"x"}, Images: 1}, []fact{factImages(1)}, nil},
		{"no image", seenResult{Texts: []string{`{"artifacts":[{"path":"plot.png"}]}`}},
			[]fact{factImages(1), factText("artifact", "plot.png")}, []string{"1 image part(s)"}},
		{"session, JSON", seenResult{Texts: []string{`{"session":{"id":"s_abc-_1","call":2,"state":"alive"}}`}},
			[]fact{factSession("alive")}, nil},
		{"session, summary", seenResult{Texts: []string{"ok · python · exit 0 · 3 ms · run r_01\nsession s_abc-_1 call 2 · alive"}},
			[]fact{factSession("alive")}, nil},
		{"session lost is not alive", seenResult{Texts: []string{`{"session":{"id":"s_a","state":"lost"}}`}},
			[]fact{factSession("alive")}, []string{"session state alive"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := missingFacts(c.seen, c.facts)
			if !slices.Equal(got, c.missing) {
				t.Fatalf("missing %q, want %q", got, c.missing)
			}
		})
	}
}
