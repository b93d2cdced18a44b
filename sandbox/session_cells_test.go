package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"
)

// A session's log keeps its most recent cells, each bounded, for its
// owner only, and goes with the session.
func TestSessionCellLog(t *testing.T) {
	ctx := context.Background()
	_, r, m := sessionRunner(t, nil)
	lang, _ := m.Language("python")
	info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "alice", Limits: m.SessionLimits()})
	if fail != nil {
		t.Fatal(fail)
	}
	if got, ok := r.SessionCells(info.ID, "alice"); !ok || len(got.Cells) != 0 || got.SessionID != info.ID {
		t.Fatalf("a new session's log: %+v %v", got, ok)
	}
	big := strings.Repeat("é", 3000) // 6000 bytes, cut on a character
	n := maxLoggedCells + 5
	for i := 1; i <= n; i++ {
		job := testJob(t, m, time.Second)
		job.RunID, job.Code = fmt.Sprint("r_", i), fmt.Sprint("c", i)
		if i == n {
			job.Code = big
		}
		if res := r.RunInSession(ctx, info.ID, "alice", RunRequest{Job: job}); res.Status != contract.StatusOK {
			t.Fatalf("cell %d: %+v", i, res.Error)
		}
	}
	got, ok := r.SessionCells(info.ID, "alice")
	if !ok || len(got.Cells) != maxLoggedCells || got.Omitted != 5 {
		t.Fatalf("log of %d cells: %d kept, %d omitted", n, len(got.Cells), got.Omitted)
	}
	for i, c := range got.Cells {
		seq := i + 6
		if c.Seq != seq || c.RunID != fmt.Sprint("r_", seq) || c.Status != contract.StatusOK || c.Language != "python" {
			t.Fatalf("cell %d: %+v", seq, c)
		}
		if seq < n && c.Code != fmt.Sprint("c", seq) {
			t.Fatalf("cell %d code %q", seq, c.Code)
		}
	}
	last := got.Cells[len(got.Cells)-1]
	if last.CodeBytes != len(big) || len(last.Code) > contract.CellCodeBytes || !utf8.ValidString(last.Code) || !strings.HasPrefix(big, last.Code) {
		t.Fatalf("the big cell's code: %d of %d bytes kept", len(last.Code), last.CodeBytes)
	}
	// The fake box prints every cell so far: past the output's bound.
	if len(last.Stdout) > contract.CellOutputBytes || !last.OutputCut {
		t.Fatalf("the last cell's stdout: %d bytes, cut %v", len(last.Stdout), last.OutputCut)
	}
	// What a reader gets is a copy: later cells do not change it.
	got.Cells[0].Code = "changed"
	if again, _ := r.SessionCells(info.ID, "alice"); again.Cells[0].Code == "changed" {
		t.Fatal("the log shares its cells with a reader")
	}
	if _, ok := r.SessionCells(info.ID, "mallory"); ok {
		t.Fatal("another client reads alice's cells")
	}
	if _, ok := r.SessionCells("s_nonsense", "alice"); ok {
		t.Fatal("an unknown session has cells")
	}
	if fail := r.CloseSession(ctx, info.ID, "alice"); fail != nil {
		t.Fatal(fail)
	}
	if _, ok := r.SessionCells(info.ID, "alice"); ok {
		t.Fatal("a closed session's cells are still there")
	}
}
