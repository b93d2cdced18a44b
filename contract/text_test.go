package contract

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// oldOneLine is sandbox's oneLine before this package, kept to show the
// bug FirstLine fixes: it cut at 500 bytes, then dropped bytes from the end
// until the rest was valid UTF-8, so that one invalid byte early in a long
// line took all the text after it.
func oldOneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > 500 {
		s = s[:500]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func TestFirstLineKeepsTextAfterInvalidBytes(t *testing.T) {
	cases := []struct{ name, in, want, old string }{
		{"invalid byte first", "\xff" + strings.Repeat("x", 600),
			"\uFFFD" + strings.Repeat("x", 494) + "…", "…"},
		{"invalid byte in the middle", strings.Repeat("a", 100) + "\xfe" + strings.Repeat("b", 500),
			strings.Repeat("a", 100) + "\uFFFD" + strings.Repeat("b", 394) + "…", strings.Repeat("a", 100) + "…"},
		{"truncated rune early on", "\xe2\x82" + strings.Repeat("€", 300),
			"\uFFFD" + strings.Repeat("€", 164) + "…", "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := oldOneLine(tc.in); got != tc.old {
				t.Fatalf("the old algorithm gave %q, not the %q this test shows", got, tc.old)
			}
			if got := FirstLine(tc.in); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestFirstLine(t *testing.T) {
	y500 := strings.Repeat("y", 500)
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"blank", " \t\r\n \n", ""},
		{"one line", "boom", "boom"},
		{"trimmed", "  \t boom \t ", "boom"},
		{"first of several", "  first\nsecond", "first"},
		{"blank lines first", "\n\n  first \nsecond", "first"},
		{"CRLF", "first\r\nsecond\r\n", "first"},
		{"lone CR ends a line too", "10%\r100%\rdone", "10%"},
		{"trailing CR", "first\r", "first"},
		{"invalid byte", "a\xffb", "a\uFFFDb"},
		{"a run of invalid bytes is one U+FFFD", "a\xff\xfe\xfdb", "a\uFFFDb"},
		{"exactly 500 bytes", y500, y500},
		{"exactly 500 bytes, then more lines", y500 + "\nnext", y500},
		{"501 bytes", y500 + "z", strings.Repeat("y", 497) + "…"},
		{"spaces before the cut are dropped", strings.Repeat("y", 495) + "      z", strings.Repeat("y", 495) + "…"},
		// é is 2 bytes, 😀 4: the cut never splits one.
		{"250 é: exactly 500 bytes", strings.Repeat("é", 250), strings.Repeat("é", 250)},
		{"251 é: cut before the one across byte 497", strings.Repeat("é", 251), strings.Repeat("é", 248) + "…"},
		{"odd offset: cut right at 497", "a" + strings.Repeat("é", 250), "a" + strings.Repeat("é", 248) + "…"},
		{"4-byte rune across the cut", strings.Repeat("y", 495) + "😀" + "zz", strings.Repeat("y", 495) + "…"},
		{"4-byte rune ending at the cut", strings.Repeat("y", 493) + "😀" + "zzzz", strings.Repeat("y", 493) + "😀" + "…"},
		{"multibyte exactly filling 500", strings.Repeat("y", 496) + "😀", strings.Repeat("y", 496) + "😀"},
		// U+FFFD is 3 bytes where the invalid byte was 1: the line can
		// grow past the bound.
		{"replacement pushes past 500", "\xff" + strings.Repeat("y", 499), "\uFFFD" + strings.Repeat("y", 494) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FirstLine(tc.in)
			if got != tc.want {
				t.Errorf("got %q (%d bytes)\nwant %q (%d bytes)", got, len(got), tc.want, len(tc.want))
			}
			checkOneLine(t, got)
		})
	}
}

func TestLastLine(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"blank", "\n \r\n\t", ""},
		{"one line", "boom\n", "boom"},
		{"last of several", "a\nb\n", "b"},
		{"blank lines after", "a\nb\n\n  \n", "b"},
		{"CRLF", "a\r\nb\r\n", "b"},
		{"a progress bar's last state", "progress 10%\rprogress 100%\n", "progress 100%"},
		{"no line break", "  only  ", "only"},
		{"invalid byte", "x\nbad \xff byte\n", "bad \uFFFD byte"},
		{"long last line", "x\n" + strings.Repeat("z", 600) + "\n", strings.Repeat("z", 497) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := LastLine(tc.in)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			checkOneLine(t, got)
		})
	}
}

// checkOneLine checks what FirstLine promises of its result.
func checkOneLine(t *testing.T, s string) {
	t.Helper()
	if len(s) > 500 || !utf8.ValidString(s) || strings.ContainsAny(s, "\r\n") || strings.TrimSpace(s) != s {
		t.Errorf("not one bounded line: %q (%d bytes)", s, len(s))
	}
	if again := FirstLine(s); again != s {
		t.Errorf("FirstLine changes its own result %q to %q", s, again)
	}
}

// FuzzFirstLine checks FirstLine's promises on any text: one line of valid
// UTF-8, trimmed, at most 500 bytes, unchanged by a second pass, and the
// text of the first line kept up to the cut.
//
//	go test -run '^$' -fuzz '^FuzzFirstLine$' -fuzztime 10s ./contract
func FuzzFirstLine(f *testing.F) {
	f.Add("\xff" + strings.Repeat("x", 600))
	f.Add(strings.Repeat("é", 251))
	f.Add("a\r\nb")
	f.Fuzz(func(t *testing.T, s string) {
		got := FirstLine(s)
		checkOneLine(t, got)
		// What is kept is the valid first line's start.
		first := strings.TrimSpace(s)
		if i := strings.IndexAny(first, "\r\n"); i >= 0 {
			first = strings.TrimSpace(first[:i])
		}
		first = strings.ToValidUTF8(first, "\uFFFD")
		kept, cut := strings.CutSuffix(got, "…")
		if !strings.HasPrefix(first, kept) || cut && len(first) <= 500 && first != got {
			t.Errorf("%q is not the start of %q", got, first)
		}
		checkOneLine(t, LastLine(s))
	})
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
