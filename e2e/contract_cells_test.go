//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// The contract table's second way: each case's program also runs as a cell
// of a session, and must answer what the one-off run answers: an agent must
// not read a session's failure differently from a run's. Sessions are reused
// across cases, one language's cells after another's, so the table costs a
// session per language and slot, not one per case.

// cells keeps a backend's open sessions between the table's cases.
type cells struct {
	s *server
	// max is how many sessions may be open at once (each is a box that
	// holds its resources while idle).
	max int

	mu   sync.Mutex
	open int
	idle []*cell
	// opened counts the sessions the table opened.
	opened int
}

// cell is an open session of the table's, and what its earlier cells left
// in it that a later program could meet.
type cell struct {
	id, lang string
	// names are the top-level lexical declarations (const, let, class)
	// of its JavaScript cells: the state a session keeps, which a later
	// program declaring the same name would meet as a SyntaxError.
	names map[string]bool
}

func newCells(s *server, max int) *cells { return &cells{s: s, max: max} }

// take gives c's program a session of its language in which nothing an
// earlier cell left changes its outcome: an idle one, or a new one (closing
// an idle one of another language when the backend's share is taken).
func (p *cells) take(t *testing.T, c contractCase) *cell {
	t.Helper()
	names := declared(c)
	p.mu.Lock()
	for i, s := range p.idle {
		if s.lang == c.lang && !c.alone && !clash(s.names, names) {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.mu.Unlock()
			return s
		}
	}
	var evict *cell
	if p.open >= p.max && len(p.idle) > 0 {
		evict, p.idle = p.idle[0], p.idle[1:]
	} else {
		p.open++
	}
	p.opened++
	p.mu.Unlock()
	if evict != nil {
		p.close(t, evict)
	}
	return &cell{id: p.s.open(t, c.lang), lang: c.lang, names: map[string]bool{}}
}

// give takes the session back after c's program ran in it with result r
// (nil when the call itself failed): a session that is lost, or that the
// program leaves in a state no reset undoes, is closed; any other is
// reset (the workspace, /tmp and the working directory as a new box's) and
// kept for the next case. The reset is the session's next cell, which
// must run whatever the program did (filled the disk, say) and answer
// nothing of it (a late error, output or timer of the program's).
func (p *cells) give(t *testing.T, s *cell, c contractCase, r *contract.Result) {
	t.Helper()
	for n := range declared(c) {
		s.names[n] = true
	}
	keep := r != nil && r.Session != nil && r.Session.State == contract.SessionAlive && !c.alone
	if keep {
		reset, _ := p.s.call(t, map[string]any{"language": s.lang, "code": resetCode[s.lang], "session_id": s.id})
		if reset.Status != contract.StatusOK || reset.Stdout != "" || reset.Stderr != "" {
			t.Errorf("the session's next cell (a reset) after the program: %+v\nstdout: %.500q\nstderr: %.500q", reset.Error, reset.Stdout, reset.Stderr)
			keep = false
		}
	}
	if !keep {
		p.close(t, s)
		p.mu.Lock()
		p.open--
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	p.idle = append(p.idle, s)
	p.mu.Unlock()
}

// close ends a session; one already lost may answer that it is.
func (p *cells) close(t *testing.T, s *cell) {
	t.Helper()
	p.s.tool(t, "session_close", map[string]any{"session_id": s.id})
}

// closeAll ends the idle sessions at the end of the table.
func (p *cells) closeAll(t *testing.T) {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.open = nil, p.open-len(idle)
	opened := p.opened
	p.mu.Unlock()
	t.Logf("%d sessions opened for the table's cells", opened)
	for _, s := range idle {
		p.close(t, s)
	}
}

// resetCode empties /workspace and /tmp (but runbox's own /tmp/.runbox)
// and goes back to /workspace, in each language, printing nothing and
// ending with no expression (a Python cell would show its value).
var resetCode = map[string]string{
	"python": `import os as _rbx_t_os, shutil as _rbx_t_sh
for _rbx_t_d in ("/workspace", "/tmp"):
    for _rbx_t_n in _rbx_t_os.listdir(_rbx_t_d):
        _rbx_t_p = _rbx_t_os.path.join(_rbx_t_d, _rbx_t_n)
        if _rbx_t_p == "/tmp/.runbox":
            continue
        if _rbx_t_os.path.isdir(_rbx_t_p) and not _rbx_t_os.path.islink(_rbx_t_p):
            _rbx_t_sh.rmtree(_rbx_t_p)
        else:
            _rbx_t_os.remove(_rbx_t_p)
_rbx_t_os.chdir("/workspace")
`,
	"javascript": `for (const d of ['/workspace', '/tmp']) {
  for (const n of require('fs').readdirSync(d)) {
    if (d + '/' + n !== '/tmp/.runbox') require('fs').rmSync(d + '/' + n, { recursive: true, force: true });
  }
}
process.chdir('/workspace');
`,
	// TypeScript's is JavaScript's, which type-checks.
	"typescript": `for (const d of ['/workspace', '/tmp']) {
  for (const n of require('fs').readdirSync(d)) {
    if (d + '/' + n !== '/tmp/.runbox') require('fs').rmSync(d + '/' + n, { recursive: true, force: true });
  }
}
process.chdir('/workspace');
`,
	"bash": `cd /workspace && find /workspace /tmp -mindepth 1 -maxdepth 1 ! -path /tmp/.runbox -exec rm -rf {} +`,
}

// topLevel finds a JavaScript program's top-level lexical declarations
// (the table's programs write them at the start of a line).
var topLevel = regexp.MustCompile(`(?m)^(?:const|let|class)\s+(?:\{([^}]*)\}|([A-Za-z_$][\w$]*))`)

// declared is the names c's program declares at the top level of a
// JavaScript session.
func declared(c contractCase) map[string]bool {
	names := map[string]bool{}
	if c.lang != "javascript" {
		return names
	}
	for _, m := range topLevel.FindAllStringSubmatch(c.code, -1) {
		if m[2] != "" {
			names[m[2]] = true
			continue
		}
		for _, part := range strings.Split(m[1], ",") {
			_, n, ok := strings.Cut(part, ":")
			if !ok {
				n = part
			}
			if n = strings.TrimSpace(n); n != "" {
				names[n] = true
			}
		}
	}
	return names
}

func clash(a, b map[string]bool) bool {
	for n := range b {
		if a[n] {
			return true
		}
	}
	return false
}

// sameAnswer fails unless the session's cell answered what the one-off run
// did in everything an agent acts on: the status, the exit code, the
// error's kind, limit, type and place, the output and whether it was cut,
// and the artifacts. What a session answers of its own (the session, the
// run's id and metrics) is not compared. Where which limit bites first is
// a race the backend decides (w.or), each way may end by either limit:
// both passed w's checks.
func sameAnswer(t *testing.T, c contractCase, w outcome, one, cell contract.Result) {
	t.Helper()
	if w.or != nil && one.Error != nil && cell.Error != nil && one.Error.Kind != cell.Error.Kind {
		t.Logf("the race of limits ended otherwise: one-off %s, session %s", one.Error.Kind, cell.Error.Kind)
		return
	}
	diff := func(what string, a, b any) {
		t.Helper()
		t.Errorf("%s differs: one-off %v, session %v", what, a, b)
	}
	if one.Status != cell.Status {
		diff("status", one.Status, cell.Status)
	}
	if exitCode(one) != exitCode(cell) {
		diff("exit code", exitCode(one), exitCode(cell))
	}
	switch a, b := one.Error, cell.Error; {
	case (a == nil) != (b == nil):
		diff("error", a, b)
	case a != nil:
		if a.Kind != b.Kind || a.Limit != b.Limit {
			diff("error kind/limit", string(a.Kind)+"/"+string(a.Limit), string(b.Kind)+"/"+string(b.Limit))
		}
		if a.Type != b.Type || a.Line != b.Line || a.Column != b.Column {
			diff("error type and place", errorPlace(a), errorPlace(b))
		}
	}
	// A cut output's marker names its run's resource.
	if a, b := strings.ReplaceAll(one.Stdout, one.RunID, "RUN"), strings.ReplaceAll(cell.Stdout, cell.RunID, "RUN"); !c.varies && a != b {
		diff("stdout", quoteShort(a), quoteShort(b))
	}
	if one.StdoutTruncated != cell.StdoutTruncated || one.StderrTruncated != cell.StderrTruncated {
		diff("stdout_truncated/stderr_truncated", []bool{one.StdoutTruncated, one.StderrTruncated}, []bool{cell.StdoutTruncated, cell.StderrTruncated})
	}
	if a, b := artifactList(one), artifactList(cell); a != b {
		diff("artifacts", a, b)
	}
	if a, b := displayList(one), displayList(cell); a != b {
		diff("displays", a, b)
	}
}

func errorPlace(e *contract.ErrorInfo) string {
	return e.Type + " at " + strings.TrimPrefix(e.Where(), " at ")
}

func quoteShort(s string) string {
	if len(s) > 200 {
		return strings.ReplaceAll(s[:100], "\n", `\n`) + "…" + strings.ReplaceAll(s[len(s)-100:], "\n", `\n`) + " (" + strconv.Itoa(len(s)) + " bytes)"
	}
	return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"`
}

// artifactList is what a result says of its artifacts, but their run's
// addresses.
// displayList is what an agent acts on of a result's displays: each one's
// source, place in the output, cut, and its mimes with their sizes and
// shapes (not their bytes: a figure's PNG may differ by its metadata).
func displayList(r contract.Result) string {
	var b strings.Builder
	for _, d := range r.Displays {
		fmt.Fprintf(&b, "%d %s after %d/%d cut %q:", d.Index, d.Source, d.After.Stdout, d.After.Stderr, d.Cut)
		mimes := slices.Sorted(maps.Keys(d.Mimes))
		for _, k := range mimes {
			m := d.Mimes[k]
			fmt.Fprintf(&b, " %s %dx%d", k, m.Width, m.Height)
			if m.Rows != nil && m.Columns != nil {
				fmt.Fprintf(&b, " %d rows x %d columns", *m.Rows, *m.Columns)
			}
		}
		b.WriteString("; ")
	}
	b.WriteString(strconv.Itoa(r.DisplaysOmitted) + " left out")
	return b.String()
}

func artifactList(r contract.Result) string {
	var b strings.Builder
	for _, a := range r.Artifacts {
		b.WriteString(a.Path + " " + a.MimeType + " " + strconv.Itoa(int(a.SizeBytes)) + " " + a.SHA256)
		if a.ContentOmitted {
			b.WriteString(" omitted")
		}
		b.WriteString("; ")
	}
	b.WriteString(strconv.Itoa(r.ArtifactsOmitted) + " left out")
	return b.String()
}
