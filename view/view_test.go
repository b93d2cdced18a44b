package view

import (
	"strings"
	"testing"
)

// The page's policy lets its own script run, by hash, and nothing else:
// no inline handler, no remote origin, no eval.
func TestPolicy(t *testing.T) {
	p := HTML()
	if strings.Contains(p, cspMark) || strings.Count(p, "Content-Security-Policy") != 2 {
		t.Fatalf("the policy is not inlined once (and once for nested frames)")
	}
	want := "script-src '" + hash(between(page, "<script>", "</script>")) + "'"
	if !strings.Contains(CSP(), want) {
		t.Fatalf("policy %q lacks %q", CSP(), want)
	}
	for _, bad := range []string{"http:", "https:", "'unsafe-eval'", "*", "script-src 'unsafe-inline'"} {
		if strings.Contains(CSP(), bad) {
			t.Errorf("policy allows %s: %s", bad, CSP())
		}
	}
	if strings.Count(page, "<script") != 1 {
		t.Errorf("the page must hold exactly one inline script, the one the policy's hash names")
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page uses %s", bad)
		}
	}
	if n := len(p); n > 64<<10 {
		t.Errorf("the page is %d bytes", n)
	}
}
