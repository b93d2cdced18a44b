package contract

import (
	"fmt"
	"strings"
)

// Summary is the result as text, complete enough for an agent that sees
// only the content blocks.
func Summary(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", res.Status)
	if res.Language != "" {
		fmt.Fprintf(&b, " · %s", res.Language)
	}
	if res.ExitCode != nil {
		fmt.Fprintf(&b, " · exit %d", *res.ExitCode)
	}
	fmt.Fprintf(&b, " · %d ms · run %s\n", res.Metrics.WallMs, res.RunID)
	if e := res.Error; e != nil {
		fmt.Fprintf(&b, "error: %s", e.Kind)
		if e.Limit != "" {
			fmt.Fprintf(&b, " (%s)", e.Limit)
		}
		if e.Type != "" {
			fmt.Fprintf(&b, " %s", e.Type)
		}
		fmt.Fprintf(&b, "%s: %s\nhint: %s\n", e.Where(), e.Message, e.Hint)
	}
	section := func(name, s string, truncated bool) {
		if s == "" {
			return
		}
		fmt.Fprintf(&b, "--- %s", name)
		if truncated {
			b.WriteString(" (truncated)")
		}
		b.WriteString(" ---\n")
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	section("stdout", res.Stdout, res.StdoutTruncated)
	section("stderr", res.Stderr, res.StderrTruncated)
	if len(res.Artifacts) > 0 {
		b.WriteString("--- artifacts ---\n")
		for _, a := range res.Artifacts {
			fmt.Fprintf(&b, "%s (%s, %d bytes) %s\n", a.Path, a.MimeType, a.SizeBytes, a.URI)
		}
		if res.ArtifactsOmitted > 0 {
			fmt.Fprintf(&b, "(%d more files omitted by the artifact cap)\n", res.ArtifactsOmitted)
		}
	}
	if len(res.Roots) > 0 {
		b.WriteString("--- your roots, read-only ---\n")
		for _, r := range res.Roots {
			fmt.Fprintf(&b, "%s ← %s\n", r.Path, r.URI)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
