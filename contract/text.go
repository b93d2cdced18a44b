package contract

import (
	"strings"
	"unicode/utf8"
)

// maxLine bounds a message's one line.
const maxLine = 500

// FirstLine is the first line of s as a message: trimmed, valid UTF-8 (an
// invalid byte becomes U+FFFD, the rest of the line is kept), at most 500
// bytes cut on a rune boundary with "…".
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxLine {
		cut := maxLine
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// LastLine is the last non-blank line of s as a message (see FirstLine).
func LastLine(s string) string {
	s = strings.TrimRight(s, "\n\r\t ")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return FirstLine(s)
}
