package manifest

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// Credential is a secret runbox's proxy adds to the requests of one
// network.allow entry on their way out, so that code in the box can call
// an API without ever holding its key. The manifest names where the value
// is (a host environment variable or a file), never the value.
type Credential struct {
	// Header is the request header the proxy sets; a header of that name
	// the program sent is replaced, never doubled.
	Header string `json:"header,omitempty" jsonschema_description:"The request header the proxy sets on every request to this entry (the program's own header of that name is replaced); default Authorization."`
	// Format is the header's value, {secret} where the secret goes.
	Format string `json:"format,omitempty" jsonschema_description:"The header's value, {secret} standing for the secret (once); default 'Bearer {secret}'. E.g. 'token {secret}', or '{secret}' for an API-key header."`
	// Env names the server's environment variable that holds the secret.
	Env string `json:"env,omitempty" jsonschema_description:"The server's environment variable holding the secret (read once, when the server starts; unset or empty fails the start). One of env and file."`
	// File names a file on the server's machine that holds the secret.
	File string `json:"file,omitempty" jsonschema_description:"An absolute path (or ~/...) on the server's machine to a file holding the secret, surrounding white space dropped (read once, when the server starts). One of env and file."`
	// Placeholder, when set, gives the box RUNBOX_SECRET_<NAME> =
	// runbox-secret:<name>, for code or libraries that insist on a key.
	Placeholder string `json:"placeholder,omitempty" jsonschema_description:"A name (lower-case letters, digits, _): the box's environment gains RUNBOX_SECRET_<NAME>=runbox-secret:<name>, a stand-in for code that insists on having a key; the proxy replaces the declared header whatever it holds, so the stand-in never leaves."`
}

// Credential defaults.
const (
	DefaultCredentialHeader = "Authorization"
	DefaultCredentialFormat = "Bearer {secret}"
	// SecretMark is where the secret goes in Format.
	SecretMark = "{secret}"
	// PlaceholderPrefix starts a placeholder's value in the box.
	PlaceholderPrefix = "runbox-secret:"
)

// HeaderName is the header the credential sets, canonical.
func (c Credential) HeaderName() string {
	if c.Header == "" {
		return DefaultCredentialHeader
	}
	return http.CanonicalHeaderKey(c.Header)
}

// FormatOrDefault is the header's value template.
func (c Credential) FormatOrDefault() string {
	if c.Format == "" {
		return DefaultCredentialFormat
	}
	return c.Format
}

// Source says where the secret is read from, for the doctor and errors.
func (c Credential) Source() string {
	if c.Env != "" {
		return "environment variable " + c.Env
	}
	return "file " + c.File
}

// PlaceholderEnv is the box's variable and value for the placeholder, or
// "", "" without one.
func (c Credential) PlaceholderEnv() (string, string) {
	if c.Placeholder == "" {
		return "", ""
	}
	return "RUNBOX_SECRET_" + strings.ToUpper(c.Placeholder), PlaceholderPrefix + c.Placeholder
}

// Intercepts says whether any entry carries a credential: then the proxy
// terminates those entries' TLS and boxes trust runbox's CA.
func (n Network) Intercepts() bool {
	for _, e := range n.Allow {
		if e.Credential != nil {
			return true
		}
	}
	return false
}

var (
	headerTokenRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
	placeholderRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

// headersNotForCredentials frame the message or belong to the proxy: a
// credential there would break or smuggle requests.
var headersNotForCredentials = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Proxy-Connection",
	"Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Upgrade", "Expect", "Content-Type", "Cookie"}

func (c Credential) validate(f string, bad func(field string, value any, allowed string)) {
	if c.Header != "" {
		if !headerTokenRe.MatchString(c.Header) {
			bad(f+".header", c.Header, "an HTTP header name")
		} else if h := http.CanonicalHeaderKey(c.Header); strings.HasPrefix(h, "Sec-") || containsFold(headersNotForCredentials, h) {
			bad(f+".header", c.Header, "a header other than "+strings.Join(headersNotForCredentials, ", ")+" and Sec-*")
		}
	}
	if c.Format != "" && (strings.Count(c.Format, SecretMark) != 1 || strings.ContainsAny(c.Format, "\r\n\x00") || len(c.Format) > 256) {
		bad(f+".format", c.Format, "one line of at most 256 bytes with {secret} once")
	}
	switch {
	case c.Env == "" && c.File == "":
		bad(f+".env", `""`, "a variable name, or file: a path (where the secret is; never the secret itself)")
	case c.Env != "" && c.File != "":
		bad(f+".file", c.File, "empty when env is set (one of env and file)")
	case c.Env != "" && !envNameRe.MatchString(c.Env):
		bad(f+".env", c.Env, "an environment variable's name")
	case c.File != "" && !strings.HasPrefix(c.File, "/") && !strings.HasPrefix(c.File, "~/"):
		bad(f+".file", c.File, "an absolute path or ~/...")
	}
	if c.Placeholder != "" && !placeholderRe.MatchString(c.Placeholder) {
		bad(f+".placeholder", c.Placeholder, "lower-case letters, digits and _, starting with a letter, at most 32")
	}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// validateCredentials checks what spans entries: placeholders are unique.
func (n Network) validateCredentials(bad func(field string, value any, allowed string)) {
	seen := map[string]bool{}
	for i, e := range n.Allow {
		if e.Credential == nil {
			continue
		}
		f := fmt.Sprintf("network.allow[%d].credential", i)
		e.Credential.validate(f, bad)
		if p := e.Credential.Placeholder; p != "" {
			if seen[p] {
				bad(f+".placeholder", p, "unique among the entries")
			}
			seen[p] = true
		}
	}
}
