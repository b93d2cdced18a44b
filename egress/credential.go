package egress

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/runbox-mcp/runbox/manifest"
)

// Credentials are the secrets of a manifest's network.allow entries, read
// once when the server starts, by entry index. They live in the server's
// memory only: never in a box, a record, a log or an error.
type Credentials map[int]credential

// credential is one entry's header, its whole value and the secret in
// it. Its String hides the value, so a stray log line cannot print it.
type credential struct {
	header string
	value  string
	secret string
}

func (c credential) String() string   { return c.header + ": [redacted]" }
func (c credential) GoString() string { return c.String() }

// apply sets the header, replacing whatever the program put there (its
// placeholder included), so the secret is sent once and only here.
func (c credential) apply(h http.Header) {
	h.Del(c.header)
	h.Set(c.header, c.value)
}

// LoadCredentials reads the secret of every entry that declares one:
// lookupEnv is os.LookupEnv outside tests. A variable that is unset or
// empty, a file that cannot be read or is empty, or a secret that cannot
// go in a header fails with the entry's field named; no error ever holds
// the secret.
func LoadCredentials(n manifest.Network, lookupEnv func(string) (string, bool)) (Credentials, error) {
	out := Credentials{}
	var errs []error
	for i, e := range n.Allow {
		c := e.Credential
		if c == nil {
			continue
		}
		secret, field, err := readSecret(*c, lookupEnv)
		if err != nil {
			errs = append(errs, fmt.Errorf("network.allow[%d].credential.%s: %w", i, field, err))
			continue
		}
		out[i] = credential{header: c.HeaderName(), value: strings.Replace(c.FormatOrDefault(), manifest.SecretMark, secret, 1), secret: secret}
	}
	return out, errors.Join(errs...)
}

// redactedSecret stands for a secret scrubbed from text.
const redactedSecret = "[redacted]"

// scrub replaces every secret of c in s, by value: whatever the pattern
// of the secret, and whoever put it there (an upstream that echoes the
// header it was sent, in a malformed line or a certificate's names, or a
// box that got it so). The Go-quoted spelling of a secret is replaced
// too, for text that quotes it. Everything runbox keeps or says of a
// connection goes through it.
func (c Credentials) scrub(s string) string {
	for _, cr := range c {
		for _, v := range []string{cr.value, cr.secret} {
			if v == "" {
				continue
			}
			s = strings.ReplaceAll(s, v, redactedSecret)
			if q := strconv.Quote(v); q[1:len(q)-1] != v {
				s = strings.ReplaceAll(s, q[1:len(q)-1], redactedSecret)
			}
		}
	}
	return s
}

// CredentialStatus is what runbox doctor says of one entry's credential:
// where it comes from and whether it is there, never its value.
type CredentialStatus struct {
	Entry   string `json:"entry"`
	Header  string `json:"header"`
	Source  string `json:"source"`
	Present bool   `json:"present"`
	Problem string `json:"problem,omitempty"`
}

// CheckCredentials reports each declared credential's source.
func CheckCredentials(n manifest.Network, lookupEnv func(string) (string, bool)) []CredentialStatus {
	var out []CredentialStatus
	for i, e := range n.Allow {
		if e.Credential == nil {
			continue
		}
		st := CredentialStatus{Entry: fmt.Sprintf("network.allow[%d] (%s)", i, e.Host), Header: e.Credential.HeaderName(), Source: e.Credential.Source()}
		if _, _, err := readSecret(*e.Credential, lookupEnv); err != nil {
			st.Problem = err.Error()
		} else {
			st.Present = true
		}
		out = append(out, st)
	}
	return out
}

// maxSecret bounds a secret read from a file.
const maxSecret = 16 << 10

func readSecret(c manifest.Credential, lookupEnv func(string) (string, bool)) (secret, field string, err error) {
	if c.Env != "" {
		v, ok := lookupEnv(c.Env)
		if !ok || v == "" {
			return "", "env", fmt.Errorf("$%s is not set in the server's environment (set it where runbox starts, or remove the entry's credential)", c.Env)
		}
		secret, field = v, "env"
	} else {
		path := c.File
		if rest, ok := strings.CutPrefix(path, "~/"); ok {
			home, herr := os.UserHomeDir()
			if herr != nil {
				return "", "file", fmt.Errorf("%s: no home directory: %v", c.File, herr)
			}
			path = filepath.Join(home, rest)
		}
		st, serr := os.Stat(path)
		if serr != nil {
			return "", "file", fmt.Errorf("cannot read %s: %v", c.File, errors.Unwrap(serr))
		}
		if !st.Mode().IsRegular() || st.Size() > maxSecret {
			return "", "file", fmt.Errorf("%s must be a regular file of at most %d bytes", c.File, maxSecret)
		}
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			return "", "file", fmt.Errorf("cannot read %s: %v", c.File, errors.Unwrap(rerr))
		}
		secret, field = strings.TrimSpace(string(b)), "file"
		if secret == "" {
			return "", field, fmt.Errorf("%s is empty", c.File)
		}
	}
	for _, r := range secret {
		if r < 0x20 || r == 0x7f {
			return "", field, errors.New("the secret holds a control character (a line break?), which cannot go in a header")
		}
	}
	return secret, field, nil
}

// Credential returns the credential of the matched entry, if it has one.
func (c Credentials) credential(m Match) (credential, bool) {
	cr, ok := c[m.Index]
	return cr, ok
}
