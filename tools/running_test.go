package tools

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/runs/runstest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// summaryOf is the text summary of a tool's answer.
func summaryOf(t *testing.T, d Deps, tool string, args map[string]any) string {
	t.Helper()
	var handler func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	if tool == RunCodeName {
		handler = RunCode(d).Handler
	}
	for _, st := range RunHandleTools(d) {
		if st.Tool.Name == tool {
			handler = st.Handler
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	out, err := handler(WithPrincipal(context.Background(), "alice"), req)
	if err != nil || len(out.Content) == 0 {
		t.Fatal(err, out)
	}
	text, _ := out.Content[0].(mcp.TextContent)
	return text.Text
}

// The running answer of run_code and run_wait shows the output so far
// when the runner tells it, cut to the answer's budget as a result is,
// and says what it shows; when the runner does not, it says so.
func TestRunningAnswerShowsOutputSoFar(t *testing.T) {
	r := runstest.NewGate()
	d, _, _ := handleDeps(t, 50*time.Millisecond, 4, 16, r)
	defer close(r.Release)
	first := callAs(t, d, "alice", RunCodeName, slowCall)
	if first.Status != contract.StatusRunning || first.Stdout != "" || !strings.Contains(first.Running.Output, "not known") {
		t.Fatalf("a running answer without a peek: %+v %+v", first, first.Running)
	}

	// Far more than the budget: lines of stdout, and a little stderr.
	var b strings.Builder
	for i := range 5000 {
		b.WriteString("line é ")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString("\n")
	}
	p := sandbox.Peek{Stdout: b.String(), StdoutBytes: 1 << 20, StdoutTruncated: true, Stderr: "warning\n", StderrBytes: 8}
	r.SetSoFar(p)
	args := map[string]any{"run_id": first.RunID, "wait_seconds": 0}
	got := callAs(t, d, "alice", RunWaitName, args)
	if got.Status != contract.StatusRunning || got.Running == nil || got.Running.Output != contract.OutputSoFar(1<<20, 8) {
		t.Fatalf("run_wait's running answer: %+v", got.Running)
	}
	budget := d.Manifest.Limits.AnswerChars
	// The same cut as a final result's: contract.ForModel within the
	// budget, the head and the tail kept.
	want := contract.ForModel(contract.Result{RunID: first.RunID, Stdout: p.Stdout, Stderr: p.Stderr, StdoutBytes: p.StdoutBytes,
		StderrBytes: p.StderrBytes, StdoutTruncated: true}, budget)
	if got.Stdout != want.Stdout || got.Stderr != "warning\n" || !got.StdoutTruncated || got.StdoutCut == nil || got.StdoutCut.Bytes != 1<<20 {
		t.Fatalf("the output so far is not cut as a result's: %d runes, cut %+v", utf8.RuneCountInString(got.Stdout), got.StdoutCut)
	}
	if n := got.StdoutCut.Shown + utf8.RuneCountInString(got.Stderr); n > budget {
		t.Fatalf("%d characters shown, budget %d", n, budget)
	}
	if !strings.HasPrefix(got.Stdout, "line é \nline é x\n") || !strings.HasSuffix(got.Stdout, p.Stdout[len(p.Stdout)-40:]) {
		t.Fatalf("head or tail missing: %.60q … %.60q", got.Stdout, got.Stdout[len(got.Stdout)-60:])
	}
	text := summaryOf(t, d, RunWaitName, args)
	for _, w := range []string{"running · python", "output: " + contract.OutputSoFar(1<<20, 8), "--- stdout so far (cut:", "--- stderr so far ---\nwarning", "line é \n"} {
		if !strings.Contains(text, w) {
			t.Fatalf("the summary lacks %q:\n%.600s", w, text)
		}
	}
}
