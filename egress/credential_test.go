package egress

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestLoadCredentials(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("  file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := network(
		manifest.Endpoint{Host: "a.example"},
		manifest.Endpoint{Host: "b.example", Credential: &manifest.Credential{Env: "TOKEN_B"}},
		manifest.Endpoint{Host: "c.example", Credential: &manifest.Credential{File: keyFile, Header: "x-api-key", Format: "{secret}"}},
	)
	creds, err := LoadCredentials(n, env(map[string]string{"TOKEN_B": "env-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != 2 || creds[1].header != "Authorization" || creds[1].value != "Bearer env-secret" ||
		creds[2].header != "X-Api-Key" || creds[2].value != "file-secret" {
		t.Fatalf("%#v", creds)
	}
	// Printed by mistake, a credential shows no secret.
	for _, s := range []string{creds[1].String(), creds[1].GoString()} {
		if strings.Contains(s, "secret") && !strings.Contains(s, "[redacted]") || strings.Contains(s, "env-secret") {
			t.Fatalf("printed %q", s)
		}
	}
	h := http.Header{"Authorization": {"Bearer runbox-secret:b", "Basic x"}}
	creds[1].apply(h)
	if got := h.Values("Authorization"); len(got) != 1 || got[0] != "Bearer env-secret" {
		t.Fatalf("header %v", got)
	}

	// Unset, empty, a file that is not there, a line break: the field is
	// named, the secret never.
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	twoLines := filepath.Join(dir, "two")
	os.WriteFile(twoLines, []byte("top-secret\ninjected: yes"), 0o600)
	for _, tc := range []struct {
		c    manifest.Credential
		env  map[string]string
		want string
	}{
		{manifest.Credential{Env: "MISSING"}, nil, "network.allow[0].credential.env: $MISSING is not set in the server's environment"},
		{manifest.Credential{Env: "EMPTY"}, map[string]string{"EMPTY": ""}, "network.allow[0].credential.env: $EMPTY is not set"},
		{manifest.Credential{File: filepath.Join(dir, "nope")}, nil, "network.allow[0].credential.file: cannot read"},
		{manifest.Credential{File: empty}, nil, "network.allow[0].credential.file: " + empty + " is empty"},
		{manifest.Credential{File: twoLines}, nil, "network.allow[0].credential.file: the secret holds a control character"},
		{manifest.Credential{Env: "CRLF"}, map[string]string{"CRLF": "top-secret\r\nX: y"}, "network.allow[0].credential.env: the secret holds a control character"},
	} {
		_, err := LoadCredentials(network(manifest.Endpoint{Host: "a.example", Credential: &tc.c}), env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "top-secret") {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}

	st := CheckCredentials(n, env(nil))
	if len(st) != 2 || st[0].Present || st[0].Source != "environment variable TOKEN_B" || !st[1].Present || st[1].Header != "X-Api-Key" {
		t.Fatalf("%+v", st)
	}
}

// TestScrubByValue: a secret is replaced wherever it is, by value, its
// whole header value and the secret alone, in any pattern, and in its
// Go-quoted spelling.
func TestScrubByValue(t *testing.T) {
	n := network(
		manifest.Endpoint{Host: "a.example", Credential: &manifest.Credential{Env: "A"}},
		manifest.Endpoint{Host: "b.example", Credential: &manifest.Credential{Env: "B", Header: "X-Api-Key", Format: "{secret}"}},
	)
	creds, err := LoadCredentials(n, env(map[string]string{"A": "plain-token-1", "B": `we"ird\key`}))
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"malformed MIME header line: Echo Authorization Bearer plain-token-1": "malformed MIME header line: Echo Authorization [redacted]",
		"the secret alone: plain-token-1;":                                    "the secret alone: [redacted];",
		"valid for plain-token-1.example, not api.test":                       "valid for [redacted].example, not api.test",
		`X-Api-Key we"ird\key twice we"ird\key`:                               "X-Api-Key [redacted] twice [redacted]",
		`quoted: "we\"ird\\key"`:                                              `quoted: "[redacted]"`,
		"nothing secret here":                                                 "nothing secret here",
	} {
		if got := creds.scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Credentials(nil).scrub("x"); got != "x" {
		t.Errorf("no credentials: %q", got)
	}
}
