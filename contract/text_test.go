package contract

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFirstLine(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"first of several", "  first\nsecond", "first"},
		{"carriage return", "first\r\nsecond", "first"},
		{"empty", "", ""},
		{"invalid byte", "a\xffb", "a\uFFFDb"},
		// The old oneLine cut a line at 500 bytes and then dropped bytes
		// from its end until it was valid UTF-8: an invalid byte early on
		// took the whole rest of the line with it.
		{"invalid byte early in a long line", "\xff" + strings.Repeat("x", 600), "\uFFFD" + strings.Repeat("x", 497) + "…"},
		{"exactly 500 bytes", strings.Repeat("y", 500), strings.Repeat("y", 500)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := FirstLine(c.in); got != c.want {
				t.Errorf("FirstLine(%.40q) = %.60q, want %.60q", c.in, got, c.want)
			}
		})
	}
	t.Run("multibyte at the cut", func(t *testing.T) {
		got := FirstLine(strings.Repeat("é", 400))
		if len(got) > 500+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
			t.Errorf("%d bytes, valid %v", len(got), utf8.ValidString(got))
		}
	})
}

func TestLastLine(t *testing.T) {
	if got := LastLine("a\nb\n\n  "); got != "b" {
		t.Errorf("%q", got)
	}
}

func TestForbiddenHintNamesEveryPurpose(t *testing.T) {
	hint := Forbidden("").Hint
	for _, g := range ForbiddenSyscalls {
		if !strings.Contains(hint, g.Purpose) {
			t.Errorf("the hint does not say %q", g.Purpose)
		}
	}
	if got := Forbidden("ptrace").Message; !strings.Contains(got, "calling ptrace") {
		t.Errorf("%q", got)
	}
}
