//go:build linux

package boxinit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// TestCaptureSnapshot: a snapshot is the stream so far (head, dropped
// bytes, tail) cut to its bound, and leaves the capture as it was.
func TestCaptureSnapshot(t *testing.T) {
	marker := func(n int) string { return fmt.Sprintf(initproto.TruncationMarker, n) }
	cases := []struct {
		name   string
		limit  int
		writes []string
		max    int
		want   string
	}{
		{"nothing yet", 10, nil, 100, ""},
		{"all of it", 10, []string{"abc", "def"}, 100, "abcdef"},
		{"cut by the bound", 100, []string{"abcdefghij"}, 4, "ab" + marker(6) + "ij"},
		{"cut by the bound, odd", 100, []string{"abcdefghij"}, 5, "ab" + marker(5) + "hij"},
		{"the capture's own cut", 6, []string{"abcdefghij"}, 100, "abc" + marker(4) + "hij"},
		{"a wrapped ring", 4, []string{"ab", "cde", "fgh", "ij"}, 100, "ab" + marker(6) + "ij"},
		{"a wrapped ring, cut again", 8, []string{"abcd", "efg", "hijk", "lm"}, 6, "abc" + marker(7) + "klm"},
		{"a bound inside the head", 20, []string{"abcdefghijkl"}, 4, "ab" + marker(8) + "kl"},
	}
	for _, tc := range cases {
		c := newCapture(tc.limit)
		var all int
		for _, w := range tc.writes {
			_, _ = c.Write([]byte(w))
			all += len(w)
		}
		before, _, _ := c.bytes()
		c.mu.Lock()
		got, trunc, total := c.snapshot(tc.max)
		c.mu.Unlock()
		if string(got) != tc.want || total != int64(all) || trunc != strings.Contains(tc.want, "truncated") {
			t.Errorf("%s: got %q (truncated %v, total %d), want %q (total %d)", tc.name, got, trunc, total, tc.want, all)
		}
		if after, _, _ := c.bytes(); !bytes.Equal(before, after) {
			t.Errorf("%s: the snapshot changed the capture: %q, then %q", tc.name, before, after)
		}
		if tc.max >= all && tc.limit >= all && string(got) != string(before) {
			t.Errorf("%s: a snapshot within its bound is not the capture: %q, %q", tc.name, got, before)
		}
	}
}

// peekOver asks a box's channel for its output so far, as the server
// does.
func peekOver(t *testing.T, sess *yamux.Session, max int) *initproto.Peek {
	t.Helper()
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := initproto.SendPeekRequest(st, max); err != nil {
		t.Fatal(err)
	}
	p, err := initproto.ReceivePeek(st, initproto.PeekLimit(max))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServePeek: peeks during a one-off job that prints show what it
// printed so far, bounded, and the job's report is the one it would have
// been without them.
func TestServePeek(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	b := startOneOff(t)
	sess := b.connect(1, true)
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	// The program goes on until the test has seen two peeks: the second
	// line waits for the file the test writes.
	job := bashJob(t, `echo line 1; echo err 1 >&2
until [ -e go ]; do sleep 0.05; done
for i in 2 3 4 5; do echo line $i; done; head -c 100000 /dev/zero | tr '\0' x; echo`)
	go func() { _ = initproto.SendJob(st, job) }()

	var first *initproto.Peek
	deadline := time.Now().Add(30 * time.Second)
	for {
		first = peekOver(t, sess, 1<<16)
		if strings.Contains(string(first.Stderr), "err 1") && strings.Contains(string(first.Stdout), "line 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no output in the peeks after 30 s: %+v %q %q", first, first.Stdout, first.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !first.Running || string(first.Stdout) != "line 1\n" || first.StdoutBytes != 7 || string(first.Stderr) != "err 1\n" || first.StdoutTruncated {
		t.Fatalf("the first peek: %+v %q %q", first, first.Stdout, first.Stderr)
	}
	if err := os.WriteFile(job.Dir+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var later *initproto.Peek
	for {
		later = peekOver(t, sess, 64)
		if later.StdoutBytes > 100000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !later.StdoutTruncated || len(later.Stdout) > 64+len(initproto.TruncationMarker)+20 || !strings.HasPrefix(string(later.Stdout), "line 1\nline 2\nline 3\nline 4\n") {
		t.Fatalf("a bounded peek of %d bytes: %+v %q", later.StdoutBytes, later, later.Stdout)
	}
	rep, err := initproto.ReceiveReport(st, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := "line 1\nline 2\nline 3\nline 4\nline 5\n" + strings.Repeat("x", 100000) + "\n"
	out, _, _ := newCaptureOf(job.MaxOutputBytes, want).bytes()
	if rep.ExitCode != 0 || string(rep.Stdout) != string(out) || rep.StdoutBytes != int64(len(want)) || string(rep.Stderr) != "err 1\n" {
		t.Fatalf("the report after the peeks: exit %d, %d bytes, stdout %.80q…, stderr %q", rep.ExitCode, rep.StdoutBytes, rep.Stdout, rep.Stderr)
	}
	// Once the program has ended, a peek still answers (its output).
	if p := peekOver(t, sess, 16); p.StdoutBytes != int64(len(want)) {
		t.Fatalf("a peek after the end: %+v", p)
	}
	_ = b.w.End()
	if code := b.exited(10 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// newCaptureOf is a capture of limit bytes that was written s.
func newCaptureOf(limit int, s string) *capture {
	c := newCapture(limit)
	_, _ = c.Write([]byte(s))
	return c
}

// TestSessionCellPeek: a session's running cell shows its output so far,
// and nothing once it ended.
func TestSessionCellPeek(t *testing.T) {
	s, run := newTestSession(t, "bash", "bash")
	if p := s.live.peek(100); p.Running {
		t.Fatalf("a peek before any cell: %+v", p)
	}
	got := make(chan *initproto.Report, 1)
	go func() {
		got <- run("echo first; until [ -e go ]; do sleep 0.05; done; echo second\n", cellTimeout)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := s.live.peek(100)
		if string(p.Stdout) == "first\n" && p.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cell's peek: %+v %q", p, p.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(s.spec.Dir+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := <-got; string(rep.Stdout) != "first\nsecond\n" || rep.ExitCode != 0 {
		t.Fatalf("the cell's report: %+v %q", rep, rep.Stdout)
	}
	if p := s.live.peek(100); p.Running || len(p.Stdout) != 0 {
		t.Fatalf("a peek after the cell: %+v", p)
	}
}
