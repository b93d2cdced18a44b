package audit

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// allPatterns are every regexp Redact runs.
func allPatterns() []*regexp.Regexp {
	return append(append([]*regexp.Regexp{}, secretPatterns...), keyValue, bearer, urlCredentials)
}

// TestNeedles pins the patterns the needles were read from: a changed or
// added pattern must have its literal in needles first.
func TestNeedles(t *testing.T) {
	want := []string{
		`-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(-----END [A-Z ]*PRIVATE KEY-----|$)`,
		`\bsk-[A-Za-z0-9_-]{16,}`,
		`\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}`,
		`\bgithub_pat_[A-Za-z0-9_]{30,}`,
		`\bglpat-[A-Za-z0-9_-]{20,}`,
		`\bxox[abposr]-[A-Za-z0-9-]{10,}`,
		`\b(AKIA|ASIA)[0-9A-Z]{16}\b`,
		`\bAIza[0-9A-Za-z_-]{35}`,
		`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`,
		`\bnpm_[A-Za-z0-9]{36}\b`,
		`(?i)((?:[A-Za-z0-9_.-]*)(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|auth)(?:[A-Za-z0-9_.-]*)["']?\s*[:=]\s*["']?)([^\s"',;&]{4,})`,
		`(?i)\b(bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{12,})`,
		`(://[^/\s:@]+:)([^/\s@]+)(@)`,
	}
	got := allPatterns()
	if len(got) != len(want) {
		t.Fatalf("Redact runs %d patterns, needles were read from %d: add the new one's literal to needles", len(got), len(want))
	}
	for i, re := range got {
		if re.String() != want[i] {
			t.Errorf("pattern %d is now %s: check needles hold a literal of each of its matches, then update this test", i, re)
		}
	}
}

// TestFoldToASCII: the runes Go's case folding (what (?i) matches with)
// takes to an ASCII letter are ASCII letters and the two needles holds.
func TestFoldToASCII(t *testing.T) {
	var found []rune
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < utf8.RuneSelf {
				found = append(found, r)
				break
			}
		}
	}
	if string(found) != "\u017f\u212a" {
		t.Fatalf("non-ASCII runes folding to ASCII: %q; needles has ſ and K only", found)
	}
	for _, s := range []string{"to\u212aen abcdefghijklmnop", "\u017fecret=abcdefgh", "ba\u017fic abcdefghijklmnop"} {
		if !keyValue.MatchString(s) && !bearer.MatchString(s) {
			t.Errorf("%q: (?i) no longer folds as this test thinks", s)
		}
		if !mayHoldSecret(s) {
			t.Errorf("mayHoldSecret(%q) = false", s)
		}
	}
}

// checkRedact fails unless Redact and the patterns alone agree on s, and
// no pattern matches a string mayHoldSecret clears.
func checkRedact(t testing.TB, s string) {
	t.Helper()
	got, gn := Redact(s)
	want, wn := redactAll(s)
	if got != want || gn != wn {
		t.Fatalf("Redact(%q) = %q, %d; the patterns give %q, %d", s, got, gn, want, wn)
	}
	if !mayHoldSecret(s) {
		for _, re := range allPatterns() {
			if re.MatchString(s) {
				t.Fatalf("%q: mayHoldSecret says no, %s matches", s, re)
			}
		}
	}
}

// redactPieces build strings near and far from secrets.
var redactPieces = []string{
	"", " ", "\n", "\t", "=", ":", ": ", "\"", "'", "@", "/", "//", "://", ".", "-", "_", "a", "Z", "0", "é", "\u212a", "\u017f",
	"-----BEGIN ", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "PRIVATE KEY",
	"sk-", "sk", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "gh", "github_pat_", "glpat-", "xoxb-", "xox", "AKIA", "ASIA", "AIza", "eyJ", "npm_",
	"password", "PassWD", "pwd", "SECRET", "token", "ToKeN", "api_key", "api-key", "apikey", "ACCESS_KEY", "private-key",
	"credentials", "Credential", "auth", "AUTH", "bearer", "Bearer", "BASIC", "basic", "Token",
	"abcdefghijklmnopqrstuvwxyz0123456789", "ABCDEFGHIJKLMNOP", "0123456789abcdef", "user", "postgres://", "https://a:b@c",
	"[REDACTED]", "42", "passed", "keyboard", "author", "monkey", "https://example.com/x", "eyJhbGciOiJIUzI1NiJ9.",
}

// redactString is a random string of pieces, each maybe with its case
// changed or a byte dropped.
func redactString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(12) {
		p := redactPieces[r.IntN(len(redactPieces))]
		switch r.IntN(6) {
		case 0:
			p = strings.ToUpper(p)
		case 1:
			p = strings.ToLower(p)
		case 2:
			if p != "" {
				i := r.IntN(len(p))
				p = p[:i] + p[i+1:]
			}
		}
		b.WriteString(p)
	}
	return b.String()
}

func TestRedactPrecheck(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	n := 10000
	if testing.Short() {
		n = 1000
	}
	cleared := 0
	for range n {
		s := redactString(r)
		checkRedact(t, s)
		if !mayHoldSecret(s) {
			cleared++
		}
	}
	if cleared < n/10 {
		t.Errorf("only %d of %d strings cleared: the generator tests too little", cleared, n)
	}
	for _, s := range append(nastyStrings, redactPieces...) {
		checkRedact(t, s)
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range redactPieces {
		f.Add(s)
	}
	f.Add("Authorization: Bearer abcdef0123456789abcdef0123")
	f.Add("postgres://app:SuperSecretPw@db.internal:5432/x")
	f.Add("to\u212aen abcdefghijklmnop")
	f.Fuzz(func(t *testing.T, s string) {
		checkRedact(t, s)
	})
}

func BenchmarkRedact(b *testing.B) {
	for name, s := range map[string]string{
		"empty": "",
		"table": "   a  b\n0  1  4\n1  2  5\n2  3  6\n",
		"head":  strings.Repeat("The quick brown fox jumps over the lazy dog: 0.125\n", 21)[:HeadBytes],
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				Redact(s)
			}
		})
		b.Run(name+"/patterns", func(b *testing.B) {
			for b.Loop() {
				redactAll(s)
			}
		})
	}
}
