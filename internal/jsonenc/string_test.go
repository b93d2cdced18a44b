package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// strings that encoding/json escapes one way or another.
var tricky = []string{
	"", "plain", `"quoted" \back\slash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f", "<a href='x'>&amp;</a>",
	"line\u2028para\u2029end", "bad \xff utf-8 \xc3", "caf\u00e9 \U0001F600 \u4e16", "\xed\xa0\x80 surrogate bytes",
	strings.Repeat("x<", 100),
}

// TestAppendStringIsJSONMarshal: the quoting is byte for byte json.Marshal's.
func TestAppendStringIsJSONMarshal(t *testing.T) {
	for _, s := range tricky {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}
