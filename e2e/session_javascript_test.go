//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// The same JavaScript program answers the same in a session's first cell as
// in a one-off run, so an agent reads both alike: an error after an await,
// process.exit, a JSON.parse error's line, and a setInterval that runs to
// the timeout; and the session lives on after the error and the exit.
func TestSessionJavaScriptAnswersAsOneOff(t *testing.T) {
	s := dockerServer(t, "")
	answer := func(r contract.Result) string {
		a := fmt.Sprintf("status %s, stdout %q", r.Status, r.Stdout)
		if r.ExitCode != nil {
			a += fmt.Sprintf(", exit %d", *r.ExitCode)
		}
		if e := r.Error; e != nil {
			a += fmt.Sprintf(", error %s %s line %d limit %s", e.Kind, e.Type, e.Line, e.Limit)
		}
		return a
	}
	for _, tc := range []struct {
		name, code string
		timeout    int
		want       string
	}{
		{"an error after an await", "async function main() {\n  await null\n  throw new TypeError('bad shape')\n}\nmain()\n", 30, "exit 1, error runtime TypeError line 3 "},
		{"process.exit", "console.log('x'); process.exit(4)\n", 30, `stdout "x\n", exit 4, error runtime`},
		{"a JSON.parse error", "const text = '{bad'\n\nconst data = JSON.parse(text)\n", 30, "exit 1, error runtime SyntaxError line 3 "},
		{"setInterval", "setInterval(() => {}, 100)\n", 2, `timeout`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneOff, _ := s.call(t, map[string]any{"language": "javascript", "code": tc.code, "timeout_seconds": tc.timeout})
			id := s.open(t, "javascript")
			cell := s.in(t, id, "javascript", tc.code, "timeout_seconds", tc.timeout)
			a, b := answer(oneOff), answer(cell)
			if tc.want == "timeout" {
				if oneOff.Error == nil || oneOff.Error.Kind != contract.KindTimeout || oneOff.Error.Limit != contract.LimitWallTime {
					t.Fatalf("one-off: %s", a)
				}
			} else if !strings.Contains(a, tc.want) {
				t.Fatalf("one-off: %s, want %s (stderr %q)", a, tc.want, oneOff.Stderr)
			}
			if a != b {
				t.Fatalf("one-off and the session's cell differ:\none-off %s\ncell    %s (stderr %q)", a, b, cell.Stderr)
			}
			if tc.want != "timeout" {
				if r := s.in(t, id, "javascript", "console.log('alive')\n"); r.Status != contract.StatusOK || r.Stdout != "alive\n" {
					t.Fatalf("the session after the call: %s", answer(r))
				}
			}
			s.tool(t, "session_close", map[string]any{"session_id": id})
		})
	}
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("sessions left boxes: %v", left)
	}
}
