package contract

import (
	"fmt"
	"strconv"
	"strings"
)

// maxSummaryConnections bounds the network lines of a summary; the
// structured result has them all.
const maxSummaryConnections = 10

// expiresLayout is how the text names when a session expires.
const expiresLayout = "2006-01-02T15:04:05Z"

// Summary renders a result as the text a client hands its model when it
// reads content rather than structured content: every fact the agent acts
// on (status, exit code, the typed error with its line and hint, the
// session, the artifacts, what was cut and where the rest is) before the
// streams, so a client that cuts a long text keeps them. Render the result
// ForModel first: Summary cuts nothing itself.
func Summary(res Result) string {
	// Every call's answer has this text: its common lines are written
	// without fmt, which was most of its cost.
	var b strings.Builder
	b.WriteString(string(res.Status))
	if res.Language != "" {
		b.WriteString(" · ")
		b.WriteString(res.Language)
	}
	if res.ExitCode != nil {
		b.WriteString(" · exit ")
		b.WriteString(strconv.Itoa(*res.ExitCode))
	}
	running := res.Running != nil
	if r := res.Running; running {
		fmt.Fprintf(&b, " · %d ms so far · run %s\noutput: %s\nnext: %s\n", r.ElapsedMs, res.RunID, r.Output, r.Next)
	} else {
		b.WriteString(" · ")
		b.WriteString(strconv.FormatInt(res.Metrics.WallMs, 10))
		b.WriteString(" ms · run ")
		b.WriteString(res.RunID)
		b.WriteString("\n")
	}
	if e := res.Error; e != nil {
		fmt.Fprintf(&b, "error: %s", e.Kind)
		if e.Limit != "" {
			fmt.Fprintf(&b, " (%s)", e.Limit)
		}
		if e.Type != "" {
			fmt.Fprintf(&b, " %s", e.Type)
		}
		fmt.Fprintf(&b, "%s: %s\n", e.Where(), e.Message)
		if e.Syscall != "" {
			fmt.Fprintf(&b, "system call: %s\n", e.Syscall)
		}
		fmt.Fprintf(&b, "hint: %s\n", e.Hint)
	}
	if s := res.Session; s != nil {
		b.WriteString("session ")
		b.WriteString(s.ID)
		b.WriteString(" · call ")
		b.WriteString(strconv.Itoa(s.Call))
		b.WriteString(" · ")
		b.WriteString(s.State)
		if s.LostReason != "" {
			fmt.Fprintf(&b, " (%s)", s.LostReason)
		}
		if !s.ExpiresAt.IsZero() {
			var at [len(expiresLayout)]byte
			b.WriteString(" · expires ")
			b.Write(s.ExpiresAt.UTC().AppendFormat(at[:0], expiresLayout))
		}
		b.WriteString("\n")
	}
	if len(res.Artifacts) > 0 {
		b.WriteString("artifacts:\n")
		for _, a := range res.Artifacts {
			fmt.Fprintf(&b, "  %s (%s, %d bytes) %s", a.Path, a.MimeType, a.SizeBytes, a.URI)
			if a.SavedTo != "" {
				fmt.Fprintf(&b, ", saved to %s", a.SavedTo)
			}
			b.WriteString("\n")
		}
		if res.ArtifactsOmitted > 0 {
			fmt.Fprintf(&b, "  (%d more files omitted by the artifact cap)\n", res.ArtifactsOmitted)
		}
	}
	b.WriteString(displaysText(res))
	if len(res.Roots) > 0 {
		b.WriteString("your roots, read-only:\n")
		for _, r := range res.Roots {
			fmt.Fprintf(&b, "  %s ← %s\n", r.Path, r.URI)
		}
	}
	if len(res.Network) > 0 {
		b.WriteString("network:\n")
		for i, c := range res.Network {
			if i == maxSummaryConnections {
				fmt.Fprintf(&b, "  (%d more in the structured result)\n", len(res.Network)-i)
				break
			}
			verdict := "allowed"
			if !c.Allowed {
				verdict = "refused: " + c.Reason
			}
			fmt.Fprintf(&b, "  %s %s:%d %s\n", c.Method, c.Host, c.Port, verdict)
		}
	}
	section := func(name, s string, truncated bool, cut *Cut) {
		if s == "" {
			return
		}
		b.WriteString("--- ")
		b.WriteString(name)
		if running {
			b.WriteString(" so far")
		}
		switch {
		case cut != nil && cut.URI != "":
			fmt.Fprintf(&b, " (cut: %d bytes written, %d characters shown; all of it: %s)", cut.Bytes, cut.Shown, cut.URI)
		case cut != nil:
			fmt.Fprintf(&b, " (cut by the box: %d bytes written, only the first and last part kept)", cut.Bytes)
		case truncated:
			b.WriteString(" (truncated)")
		}
		b.WriteString(" ---\n")
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	section("stdout", res.Stdout, res.StdoutTruncated, res.StdoutCut)
	section("stderr", res.Stderr, res.StderrTruncated, res.StderrCut)
	return strings.TrimRight(b.String(), "\n")
}
