package tools

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

	s.Put(result("r1", map[string]string{"a.txt": "aaaa"}), contract.Result{})
	s.Put(result("r2", map[string]string{"b.txt": "bbbb"}), contract.Result{})
	if a, err := s.Get("r1", "a.txt"); err != nil || string(a.Data) != "aaaa" {
		t.Fatalf("get: %v %v", a, err)
	}
	if _, err := s.Get("r1", "nope"); err == nil || !strings.Contains(err.Error(), `no artifact "nope"`) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := s.Get("r9", "a"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("unknown run: %v", err)
	}
	s.Put(result("r3", map[string]string{"c.txt": "cccc"}), contract.Result{}) // 12 bytes > 10: r1 goes
	if _, err := s.Get("r1", "a.txt"); err == nil || !strings.Contains(err.Error(), "evicted") {
		t.Errorf("evicted: %v", err)
	}
	s.Put(result("big", map[string]string{"x": "01234567890"}), contract.Result{})
	if _, err := s.Get("big", "x"); err == nil || !strings.Contains(err.Error(), "not kept") {
		t.Errorf("too big: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.Get("r3", "c.txt"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	if s.bytes != 0 || len(s.runs) != 0 {
		t.Errorf("accounting: %d bytes, %d runs", s.bytes, len(s.runs))
	}
}
