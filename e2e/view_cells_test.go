//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// sessionCellsFacts are what view/cells.mjs read of the view and of the
// session's cells resource.
type sessionCellsFacts struct {
	Template string
	RunIDs   []string
	History  string
	Past     []struct {
		Cell, Status, RunID, Stdout, Error string
		Code                               []string
		Highlighted                        []int
	}
	Current      [][]string
	Reads        []string
	Csp          *string
	StrangerRead string
	OwnCells     [][]any
	AfterClose   string
}

// TestViewSessionCells runs three cells of a session through runbox and
// draws the third in headless Chromium: the view shows all three, the
// first two from the session's log read through the host; another
// principal cannot read that log.
func TestViewSessionCells(t *testing.T) {
	if _, err := os.Stat("view/node_modules/playwright-core"); err != nil {
		t.Fatalf("the view's test host is not installed (make e2e-prep: npm ci in e2e/view): %v", err)
	}
	s, alice, bob := aliceAndBob(t)
	cmd := exec.Command("node", "cells.mjs", s.url("http"), alice, bob)
	cmd.Dir = "view"
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium(t))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cells.mjs: %v\n%s\n%s", err, out, exitStderr(err))
	}
	var f sessionCellsFacts
	if err := json.Unmarshal(out, &f); err != nil {
		t.Fatalf("facts: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	if f.Template != "runbox://sessions/{session_id}/cells" {
		t.Errorf("resource template %q", f.Template)
	}
	if len(f.RunIDs) != 3 || slices.Contains(f.RunIDs, "") {
		t.Fatalf("run ids %v", f.RunIDs)
	}
	// Cells 1 and 2, which this view never saw, each with its status,
	// code, output and run; cell 2's error on its line.
	if f.History != "2" || len(f.Past) != 2 {
		t.Fatalf("the view drew %s earlier cells: %+v", f.History, f.Past)
	}
	p1, p2 := f.Past[0], f.Past[1]
	if p1.Cell != "1" || p1.Status != "ok" || p1.RunID != f.RunIDs[0] || !slices.Equal(p1.Code, []string{"x = 41", "print('cell one')"}) || strings.TrimSpace(p1.Stdout) != "cell one" || p1.Error != "" {
		t.Errorf("cell 1: %+v", p1)
	}
	if p2.Cell != "2" || p2.Status != "error" || p2.RunID != f.RunIDs[1] || len(p2.Code) != 3 || !strings.Contains(p2.Stdout, "cell two") ||
		!strings.Contains(p2.Error, "runtime") || !strings.Contains(p2.Error, "undefined_name") || !slices.Equal(p2.Highlighted, []int{3}) {
		t.Errorf("cell 2: %+v", p2)
	}
	// Cell 3, the call the view is of, drawn whole: x + y of cells 1 and 2.
	if len(f.Current) != 1 || f.Current[0][0] != "3" || strings.TrimSpace(f.Current[0][1]) != "83" {
		t.Errorf("cell 3: %v", f.Current)
	}
	if len(f.Reads) != 1 || !strings.HasPrefix(f.Reads[0], "runbox://sessions/") || !strings.HasSuffix(f.Reads[0], "/cells") {
		t.Errorf("what the view read through the host: %v", f.Reads)
	}
	if f.Csp != nil {
		t.Errorf("the view broke its own policy %s times", *f.Csp)
	}
	// The owner reads all three; another principal, and anyone once the
	// session is closed, reads nothing.
	if len(f.OwnCells) != 3 || f.OwnCells[1][1] != "error" || f.OwnCells[1][2] != "runtime" || f.OwnCells[2][0] != float64(3) {
		t.Errorf("the owner's read: %v", f.OwnCells)
	}
	if f.StrangerRead == "" {
		t.Error("another principal read the session's cells")
	}
	if f.AfterClose == "" {
		t.Error("the cells outlived the session")
	}
}
