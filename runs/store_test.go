package runs

import (
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

func result(id string, files map[string]string) contract.Result {
	r := contract.Result{RunID: id}
	for p, c := range files {
		r.Artifacts = append(r.Artifacts, contract.Artifact{Path: p, Data: []byte(c)})
	}
	return r
}

func TestArtifactStore(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewArtifactStore(time.Minute, 10)
	s.now = func() time.Time { return now }

	s.Put("alice", result("r1", map[string]string{"a.txt": "aaaa"}), contract.Result{})
	s.Put("alice", result("r2", map[string]string{"b.txt": "bbbb"}), contract.Result{})
	if a, err := s.Get("alice", "r1", "a.txt"); err != nil || string(a.Data) != "aaaa" {
		t.Fatalf("get: %v %v", a, err)
	}
	if _, err := s.Get("alice", "r1", "nope"); err == nil || !strings.Contains(err.Error(), `no artifact "nope"`) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := s.Get("alice", "r9", "a"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("unknown run: %v", err)
	}
	s.Put("alice", result("r3", map[string]string{"c.txt": "cccc"}), contract.Result{}) // 12 bytes > 10: r1 goes
	if _, err := s.Get("alice", "r1", "a.txt"); err == nil || !strings.Contains(err.Error(), "evicted") {
		t.Errorf("evicted: %v", err)
	}
	s.Put("alice", result("big", map[string]string{"x": "01234567890"}), contract.Result{})
	if _, err := s.Get("alice", "big", "x"); err == nil || !strings.Contains(err.Error(), "not kept") {
		t.Errorf("too big: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.Get("alice", "r3", "c.txt"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	if s.bytes != 0 || len(s.runs) != 0 {
		t.Errorf("accounting: %d bytes, %d runs", s.bytes, len(s.runs))
	}
}

// TestArtifactStoreOwners: a run's files and streams are its owner's; to
// another caller a kept run, a gone one and one that never was read
// alike, word for word (no oracle of what exists).
func TestArtifactStoreOwners(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewArtifactStore(time.Minute, 100)
	s.now = func() time.Time { return now }
	kept := result("r_kept", map[string]string{"a.txt": "aaaa"})
	kept.Stdout = "all of it"
	s.Put("alice", kept, contract.Result{StdoutCut: &contract.Cut{URI: "runbox://runs/r_kept/stdout"}})
	s.Put("alice", result("r_big", map[string]string{"x": strings.Repeat("x", 200)}), contract.Result{})
	if _, err := s.Get("alice", "r_kept", "a.txt"); err != nil {
		t.Fatal(err)
	}
	if text, err := s.Stream("alice", "r_kept", contract.StreamStdout); err != nil || text != "all of it" {
		t.Fatalf("alice's stream: %q %v", text, err)
	}
	if _, err := s.Stream("alice", "r_kept", contract.StreamStderr); err == nil || !strings.Contains(err.Error(), "showed all of its stderr") {
		t.Fatalf("a stream the answer did not cut: %v", err)
	}
	unknown := func(id string) (string, string) {
		_, gerr := s.Get("bob", "r_never", "a.txt")
		_, serr := s.Stream("bob", "r_never", contract.StreamStdout)
		return strings.ReplaceAll(gerr.Error(), "r_never", id), strings.ReplaceAll(serr.Error(), "r_never", id)
	}
	for _, id := range []string{"r_kept", "r_big"} {
		wantGet, wantStream := unknown(id)
		if a, err := s.Get("bob", id, "a.txt"); err == nil || err.Error() != wantGet {
			t.Errorf("bob reads alice's %s: %q, %v (want %q)", id, a.Data, err, wantGet)
		}
		if text, err := s.Stream("bob", id, contract.StreamStdout); err == nil || err.Error() != wantStream {
			t.Errorf("bob reads alice's %s stdout: %q, %v (want %q)", id, text, err, wantStream)
		}
	}
	if _, err := s.Get("alice", "r_big", "x"); err == nil || !strings.Contains(err.Error(), "not kept") {
		t.Errorf("alice is told why her run is gone: %v", err)
	}
}
