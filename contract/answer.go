package contract

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Streams a result carries, as their resources name them.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// StreamURITemplate is the resource template that serves the streams.
const StreamURITemplate = ArtifactURIPrefix + "{run_id}/{stream}"

// StreamURI is where all that runbox kept of a run's stdout or stderr can
// be read back.
func StreamURI(runID, stream string) string {
	return ArtifactURIPrefix + runID + "/" + stream
}

// ParseStreamURI splits a stream URI into its run and stream.
func ParseStreamURI(uri string) (runID, stream string, ok bool) {
	rest, ok := strings.CutPrefix(uri, ArtifactURIPrefix)
	if !ok {
		return "", "", false
	}
	runID, stream, ok = strings.Cut(rest, "/")
	return runID, stream, ok && runID != "" && (stream == StreamStdout || stream == StreamStderr)
}

// headShare is the part of a cut stream's budget given to its head; the
// tail gets the rest, since a program's last lines (a traceback, a final
// result) are what an agent acts on most.
const headShare = 0.4

// ForModel shapes a result for the model's context: stdout and stderr
// together within budget characters (their heads and tails around a
// marker that says what is cut and names the resource holding all of it),
// so that no client's own cut (a preview, a middle cut, a head-only cut)
// ever falls on what the agent acts on. The whole streams stay in res for
// the resource; the returned result shares nothing mutable with res but
// its artifacts' data.
func ForModel(res Result, budget int) Result {
	out := res
	nOut, nErr := utf8.RuneCountInString(res.Stdout), utf8.RuneCountInString(res.Stderr)
	if budget <= 0 || nOut+nErr <= budget {
		out.StdoutCut = keptCut(res.StdoutTruncated, res.StdoutBytes, nOut)
		out.StderrCut = keptCut(res.StderrTruncated, res.StderrBytes, nErr)
		return out
	}
	// Each stream gets half the budget, and what one does not need goes
	// to the other.
	aOut, aErr := min(nOut, budget/2), min(nErr, budget/2)
	left := budget - aOut - aErr
	aOut += min(left, nOut-aOut)
	aErr += min(budget-aOut-aErr, nErr-aErr)
	out.Stdout, out.StdoutCut = cutStream(res.RunID, StreamStdout, res.Stdout, nOut, aOut, res.StdoutTruncated, res.StdoutBytes)
	out.Stderr, out.StderrCut = cutStream(res.RunID, StreamStderr, res.Stderr, nErr, aErr, res.StderrTruncated, res.StderrBytes)
	out.StdoutTruncated = res.StdoutTruncated || out.StdoutCut != nil && out.StdoutCut.URI != ""
	out.StderrTruncated = res.StderrTruncated || out.StderrCut != nil && out.StderrCut.URI != ""
	return out
}

// keptCut describes a stream that the answer shows whole but that the box
// itself cut at limits.max_output_bytes: nothing more is kept to read.
func keptCut(truncated bool, written int64, shown int) *Cut {
	if !truncated {
		return nil
	}
	return &Cut{Bytes: written, Shown: shown}
}

// cutStream keeps n of s's runes: its head and tail, cut at line breaks
// where one is near, around a marker naming the stream's resource. kept
// says whether the box itself already cut s.
func cutStream(runID, stream, s string, runes, n int, kept bool, written int64) (string, *Cut) {
	if runes <= n {
		return s, keptCut(kept, written, runes)
	}
	headRunes := int(float64(n) * headShare)
	head := prefixRunes(s, headRunes)
	tail := suffixRunes(s, n-headRunes)
	// A cut at a line break reads better, when one is close.
	if i := strings.LastIndexByte(head, '\n'); i >= 0 && len(head)-i < 200 {
		head = head[:i+1]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < 200 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	shown := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail)
	uri := StreamURI(runID, stream)
	var b strings.Builder
	b.WriteString(head)
	if !strings.HasSuffix(head, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "…[runbox: %d characters of %s cut here; this answer shows the first %d and the last %d; all of it: %s]…\n",
		runes-shown, stream, utf8.RuneCountInString(head), utf8.RuneCountInString(tail), uri)
	b.WriteString(tail)
	return b.String(), &Cut{Bytes: max(written, int64(len(s))), Shown: shown, URI: uri}
}

func prefixRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

func suffixRunes(s string, n int) string {
	i := len(s)
	for n > 0 && i > 0 {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
		n--
	}
	return s[i:]
}
