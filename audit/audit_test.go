package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// Real-looking secrets (none of them valid) and where they appear.
func TestRedact(t *testing.T) {
	cases := []struct {
		in     string
		secret string // must be gone
		keep   string // must stay
	}{
		{"key = sk-live-51HrunboxFAKEsecretDoNotLeak", "sk-live-51HrunboxFAKE", "key = "},
		{"ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345", "sk-ant-api03", "ANTHROPIC_API_KEY="},
		{"token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 used", "ghp_aBcDeF", "used"},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "github_pat_11ABC", ""},
		{"aws_access_key_id=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws_access_key_id="},
		{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "aws_secret_access_key = "},
		{`{"password": "hunter2-correct-horse"}`, "hunter2", `{"password": "`},
		{"DB_PASSWORD=s3cr3t!value and more", "s3cr3t", "and more"},
		{"Authorization: Bearer abcdef0123456789abcdef0123", "abcdef0123456789", "Authorization: Bearer [REDACTED]"},
		{"postgres://app:SuperSecretPw@db.internal:5432/x", "SuperSecretPw", "postgres://app:"},
		{"xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-1234", ""},
		{"AIzaSyA-1234567890abcdefghijklmnopqrstuv", "AIzaSyA-123", ""},
		{"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJhbGciOiJIUzI1NiJ9", "jwt "},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----\nafter", "MIIEpAIBAAKCAQEA7", "after"},
		{"glpat-AbCdEfGhIjKlMnOpQrSt1234", "glpat-AbCd", ""},
	}
	for _, c := range cases {
		got, n := Redact(c.in)
		if strings.Contains(got, c.secret) || n == 0 || !strings.Contains(got, Redacted) || !strings.Contains(got, c.keep) {
			t.Errorf("Redact(%q) = %q (%d)", c.in, got, n)
		}
	}
	for _, clean := range []string{"print(6*7)", "42\n", "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 3", "the token count is 12", "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"} {
		if got, n := Redact(clean); got != clean || n != 0 {
			t.Errorf("Redact(%q) = %q (%d): nothing there is secret", clean, got, n)
		}
	}
}

func TestRotationAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "audit.jsonl")
	l, err := Open(manifest.Audit{Enabled: true, Path: path, MaxBytes: 2048, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := l.Record(Entry{RunID: "run-" + strings.Repeat("x", 100) + string(rune('A'+i%26)) + string(rune('a'+i/26)), Language: "python"}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	for _, p := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(p)
		if err != nil || st.Size() > 2048 || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", p, st, err)
		}
	}
	if _, err := os.Stat(path + ".3"); err == nil {
		t.Error("more rotated files than keep")
	}
	all, err := Read(path, 2)
	if err != nil || len(all) == 0 || len(all) >= 40 {
		t.Fatalf("read %d entries: %v", len(all), err)
	}
	last := all[len(all)-1].RunID
	if !strings.HasSuffix(last, "Nb") { // the 40th: i=39 → 'N', 'b'
		t.Errorf("newest entry %q is not last", last)
	}
	if _, ok := Find(all, last); !ok {
		t.Error("Find")
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none.jsonl"), 2); err == nil {
		t.Error("a missing log must say so")
	}
}

func TestDisabled(t *testing.T) {
	l, err := Open(manifest.Audit{Enabled: false})
	if l != nil || err != nil {
		t.Fatal("a disabled log opens nothing")
	}
	if l.Record(Entry{RunID: "x"}) != nil || l.Close() != nil {
		t.Fatal("a nil log accepts and drops")
	}
}
