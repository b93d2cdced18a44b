//go:build linux

package boxinit

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

func TestCaptureKeepsHeadAndTail(t *testing.T) {
	cases := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{"under limit", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly limit", 6, []string{"abcdef"}, "abcdef"},
		{"one big write", 6, []string{"abcdefghij"}, "abc" + fmt.Sprintf(initproto.TruncationMarker, 4) + "hij"},
		{"many small writes", 6, strings.Split("abcdefghij", ""), "abc" + fmt.Sprintf(initproto.TruncationMarker, 4) + "hij"},
		{"ring wraps", 4, []string{"ab", "cde", "fgh", "ij"}, "ab" + fmt.Sprintf(initproto.TruncationMarker, 6) + "ij"},
	}
	for _, tc := range cases {
		c := newCapture(tc.limit)
		var all int
		for _, w := range tc.writes {
			c.Write([]byte(w))
			all += len(w)
		}
		got, trunc, total := c.bytes()
		if string(got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if total != int64(all) || trunc != (all > tc.limit) {
			t.Errorf("%s: total %d truncated %v", tc.name, total, trunc)
		}
	}
}

func TestCaptureFloodStaysBounded(t *testing.T) {
	c := newCapture(1000)
	chunk := bytes.Repeat([]byte("x"), 4096)
	for i := 0; i < 10000; i++ {
		c.Write(chunk)
	}
	c.Write([]byte("THE END"))
	got, trunc, total := c.bytes()
	if !trunc || total != 4096*10000+7 || !bytes.HasSuffix(got, []byte("THE END")) || len(got) > 1100 {
		t.Fatalf("flood: %d bytes kept, truncated %v, total %d", len(got), trunc, total)
	}
}
