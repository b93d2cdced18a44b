package contract

import (
	"strings"
	"time"
	"unicode/utf8"
)

// SessionCellsURITemplate is the resource template that serves a
// session's cells so far.
const SessionCellsURITemplate = "runbox://sessions/{session_id}/cells"

// SessionCellsURI is where a session's cells can be read.
func SessionCellsURI(sessionID string) string {
	return "runbox://sessions/" + sessionID + "/cells"
}

// ParseSessionCellsURI names the session a cells URI is of.
func ParseSessionCellsURI(uri string) (sessionID string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "runbox://sessions/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/cells")
	return id, ok && id != "" && !strings.ContainsAny(id, "/?#")
}

// SessionCells are a session's cells so far, oldest first, as the
// session's log keeps them: the most recent ones, each bounded.
type SessionCells struct {
	SessionID string        `json:"session_id"`
	Cells     []SessionCell `json:"cells"`
	// Omitted counts older cells the log no longer keeps.
	Omitted int `json:"omitted,omitempty"`
}

// SessionCell is one call of a session, summed up: what ran and how it
// ended, with links to the run's resources for the rest.
type SessionCell struct {
	// Seq is the call's number in the session (SessionRef.Call).
	Seq      int    `json:"seq"`
	RunID    string `json:"run_id"`
	Language string `json:"language"`
	// Code is the cell's source, its head when CodeBytes is larger.
	Code      string     `json:"code"`
	CodeBytes int        `json:"code_bytes"`
	Status    Status     `json:"status"`
	ExitCode  *int       `json:"exit_code"`
	ErrorKind Kind       `json:"error_kind,omitempty"`
	Error     string     `json:"error,omitempty"`
	ErrorLine int        `json:"error_line,omitempty"`
	Stdout    string     `json:"stdout,omitempty"`
	Stderr    string     `json:"stderr,omitempty"`
	OutputCut bool       `json:"output_cut,omitempty"`
	Displays  int        `json:"displays,omitempty"`
	Artifacts []CellLink `json:"artifacts,omitempty"`
	WallMs    int64      `json:"wall_ms"`
	At        time.Time  `json:"at"`
}

// CellLink names one of a run's resources.
type CellLink struct {
	Path string `json:"path"`
	URI  string `json:"uri"`
}

// Bounds of one logged cell: the log is for a person's view of the
// session, not a second copy of its results.
const (
	CellCodeBytes   = 4 << 10
	CellOutputBytes = 1 << 10
	CellArtifacts   = 8
)

// CellOf sums up res, the result of a session's call seq running code.
func CellOf(seq int, code string, res Result, at time.Time) SessionCell {
	c := SessionCell{Seq: seq, RunID: res.RunID, Language: res.Language, CodeBytes: len(code), Status: res.Status, ExitCode: res.ExitCode,
		Displays: len(res.Displays), WallMs: res.Metrics.WallMs, At: at}
	// A head of code shares the caller's string: no second copy of a
	// source the session keeps for a replay.
	c.Code, _ = headUTF8(code, CellCodeBytes)
	if res.Error != nil {
		c.ErrorKind, c.Error, c.ErrorLine = res.Error.Kind, FirstLine(res.Error.Message), res.Error.Line
	}
	var outCut, errCut bool
	c.Stdout, outCut = headUTF8(res.Stdout, CellOutputBytes)
	c.Stderr, errCut = headUTF8(res.Stderr, CellOutputBytes)
	c.OutputCut = res.StdoutTruncated || res.StderrTruncated || outCut || errCut
	for i, a := range res.Artifacts {
		if i == CellArtifacts {
			break
		}
		c.Artifacts = append(c.Artifacts, CellLink{Path: a.Path, URI: a.URI})
	}
	return c
}

// headUTF8 is s made valid UTF-8 and cut to at most n bytes on a
// character boundary; cut says whether anything was left out. Valid text
// is not copied: its head shares s.
func headUTF8(s string, n int) (head string, cut bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
