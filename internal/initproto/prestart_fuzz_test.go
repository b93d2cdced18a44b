package initproto

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// isRawURLBase64 reports whether s uses only the unpadded URL-safe base64
// alphabet, so that it passes as one command-line argument untouched.
func isRawURLBase64(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func prestartStrings(p Prestart) []string {
	return append(append([]string{p.Dir}, p.Argv...), p.Env...)
}

// FuzzPrestart checks that EncodePrestart makes one plain argument that
// DecodePrestart turns back into the same Prestart, and that whatever
// DecodePrestart accepts encodes and decodes again to itself.
//
//	go test -run '^$' -fuzz '^FuzzPrestart$' -fuzztime 20s ./internal/initproto
func FuzzPrestart(f *testing.F) {
	f.Add("python3", "/usr/lib/runbox/prestart.py", "PYTHONUNBUFFERED=1\x00MPLBACKEND=Agg", "/workspace", int64(10), int64(128), EncodePrestart(Prestart{
		Argv: []string{"python3", "-c", "import numpy"}, Env: []string{"A=1"}, Dir: "/workspace", CPUSeconds: 5,
	}))
	f.Add("node", "", "", "", int64(0), int64(0), "")
	f.Add("a\"b\\c", "\u2028<>&", "K=v\nW=é", "/tmp/ä", int64(-1), int64(1<<62), "eyJhcmd2IjpudWxsfQ")
	f.Add("\xff\xfe", "x", "BAD=\xc3", "/w", int64(0), int64(-5), "bnVsbA")
	f.Add("x", "y", "z", "/", int64(1), int64(1), "e30=")
	f.Add("x", "y", "z", "/", int64(1), int64(1), "eyJBUkdWIjpbIngiXSwiYXJndiI6WyJ5Il0sImRpciI6MX0")
	f.Fuzz(func(t *testing.T, argv0, argv1, env, dir string, cpu, nproc int64, arg string) {
		var envs []string
		if env != "" {
			envs = strings.Split(env, "\x00")
		}
		p := Prestart{Argv: []string{argv0, argv1}, Env: envs, Dir: dir, CPUSeconds: cpu, NProc: nproc}
		enc := EncodePrestart(p)
		if enc == "" || !isRawURLBase64(enc) || strings.HasPrefix(enc, "-") {
			t.Fatalf("encoded as %q", enc)
		}
		got, err := DecodePrestart(enc)
		if err != nil {
			t.Fatalf("decoding %q: %v", enc, err)
		}
		valid := true
		for _, s := range prestartStrings(p) {
			valid = valid && utf8.ValidString(s)
		}
		if valid {
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, p)
			}
		} else {
			// JSON has no place for invalid UTF-8: it comes back as
			// U+FFFD, and everything else as it was.
			if len(got.Argv) != len(p.Argv) || len(got.Env) != len(p.Env) || got.CPUSeconds != cpu || got.NProc != nproc {
				t.Fatalf("round trip of invalid UTF-8\n got %#v\nwant %#v", got, p)
			}
			for _, s := range prestartStrings(got) {
				if !utf8.ValidString(s) {
					t.Fatalf("decoded invalid UTF-8 %q", s)
				}
			}
		}

		// Whatever decodes, re-encodes to something that decodes to it.
		q, err := DecodePrestart(arg)
		if err != nil {
			return
		}
		enc2 := EncodePrestart(q)
		q2, err := DecodePrestart(enc2)
		if err != nil || !reflect.DeepEqual(q, q2) {
			t.Fatalf("%q decoded to %#v, re-encoded as %q, decoded to %#v (%v)", arg, q, enc2, q2, err)
		}
		if enc3 := EncodePrestart(q2); enc3 != enc2 {
			t.Fatalf("encoding is not stable: %q then %q", enc2, enc3)
		}
	})
}
