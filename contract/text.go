package contract

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLine bounds a message's one line, in bytes, "…" included: messages go
// into a JSON result an agent reads, and some languages put whole
// documents in them.
const maxLine = 500

// ellipsis ends a line that was cut.
const ellipsis = "…"

// FirstLine is the first line of s as a message: the text up to the first
// line break ("\n", "\r\n", or a lone "\r" as a progress bar prints),
// trimmed of white space, made valid UTF-8 (each run of invalid bytes
// becomes U+FFFD and the text after it is kept), and at most 500 bytes:
// a longer line is cut on a character boundary and ends with "…".
// FirstLine(FirstLine(s)) == FirstLine(s).
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxLine {
		return s
	}
	cut := maxLine - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimRightFunc(s[:cut], unicode.IsSpace) + ellipsis
}

// LastLine is the last line of s that is not blank, as [FirstLine] makes
// a message of it: what a program printed last before it failed.
func LastLine(s string) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	if i := strings.LastIndexAny(s, "\r\n"); i >= 0 {
		s = s[i+1:]
	}
	return FirstLine(s)
}
