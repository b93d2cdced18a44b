package audit

import (
	"regexp"
	"strings"
)

// Redacted replaces each secret-looking value.
const Redacted = "[REDACTED]"

// secretPatterns match values whose whole match is secret.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(-----END [A-Z ]*PRIVATE KEY-----|$)`),
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`),                                      // OpenAI, Anthropic (sk-ant-), Stripe
	regexp.MustCompile(`\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}`),                     // GitHub tokens
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{30,}`),                               // GitHub fine-grained
	regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`),                                   // GitLab
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`),                              // Slack
	regexp.MustCompile(`\b(AKIA|ASIA)[0-9A-Z]{16}\b`),                                  // AWS key ids
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`),                                      // Google API keys
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), // JWTs
	regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`),                                      // npm
}

// keyValue matches NAME=value, NAME: value and "name": "value" where the
// name says secret; the value is replaced, the name kept.
var keyValue = regexp.MustCompile(`(?i)((?:[A-Za-z0-9_.-]*)(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|auth)(?:[A-Za-z0-9_.-]*)["']?\s*[:=]\s*["']?)([^\s"',;&]{4,})`)

// bearer matches an Authorization header's credentials.
var bearer = regexp.MustCompile(`(?i)\b(bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{12,})`)

// urlCredentials matches the password of scheme://user:password@host.
var urlCredentials = regexp.MustCompile(`(://[^/\s:@]+:)([^/\s@]+)(@)`)

// Redact replaces secret-looking values in s and says how many.
func Redact(s string) (string, int) {
	if !mayHoldSecret(s) {
		// Most output holds none, and the patterns cost microseconds
		// even on an empty string (milliseconds on a head of text).
		return s, 0
	}
	return redactAll(s)
}

// redactAll is Redact without the check that s may hold a secret.
func redactAll(s string) (string, int) {
	n := 0
	for _, re := range secretPatterns {
		s = re.ReplaceAllStringFunc(s, func(string) string { n++; return Redacted })
	}
	s = bearer.ReplaceAllStringFunc(s, func(m string) string {
		sub := bearer.FindStringSubmatch(m)
		if strings.HasPrefix(sub[2], "[REDACTED") {
			return m
		}
		n++
		return sub[1] + " " + Redacted
	})
	s = keyValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := keyValue.FindStringSubmatch(m)
		if strings.HasPrefix(sub[2], "[REDACTED") || isScheme(sub[2]) {
			return m
		}
		n++
		return sub[1] + Redacted
	})
	s = urlCredentials.ReplaceAllStringFunc(s, func(m string) string {
		sub := urlCredentials.FindStringSubmatch(m)
		n++
		return sub[1] + Redacted + sub[3]
	})
	return s, n
}

// isScheme says whether v is an Authorization scheme, whose credentials
// bearer has already redacted.
func isScheme(v string) bool {
	return strings.EqualFold(v, "bearer") || strings.EqualFold(v, "basic") || strings.EqualFold(v, "token")
}

// needle is a literal every match of some pattern above contains.
type needle struct {
	lit string
	// fold: lit is lower case and matches in any ASCII case, for the
	// (?i) patterns.
	fold bool
}

// needles are, for each pattern, a literal all its matches contain (the
// names of keyValue and bearer in any case); a string holding none of them
// matches no pattern. Under (?i), Go's regexp folds k with the Kelvin sign
// (U+212A) and s with the long s (U+017F), the only non-ASCII runes that
// fold to ASCII: a string holding either takes the patterns.
// TestNeedles fails when a pattern changes, to have this list checked.
var needles = []needle{
	{lit: "-----BEGIN "}, {lit: "sk-"},
	{lit: "ghp_"}, {lit: "gho_"}, {lit: "ghu_"}, {lit: "ghs_"}, {lit: "ghr_"},
	{lit: "github_pat_"}, {lit: "glpat-"}, {lit: "xox"}, {lit: "AKIA"}, {lit: "ASIA"},
	{lit: "AIza"}, {lit: "eyJ"}, {lit: "npm_"},
	// keyValue: password and passwd, api, access and private key,
	// credential(s).
	{lit: "pass", fold: true}, {lit: "pwd", fold: true}, {lit: "secret", fold: true},
	{lit: "token", fold: true}, {lit: "key", fold: true}, {lit: "credential", fold: true},
	{lit: "auth", fold: true},
	// bearer (token is above).
	{lit: "bearer", fold: true}, {lit: "basic", fold: true},
	// urlCredentials.
	{lit: "://"},
	{lit: "\u212a"}, {lit: "\u017f"},
}

// needlesAt lists the needles by the byte they start with, in either case
// for those that fold.
var needlesAt = func() (t [256][]needle) {
	for _, n := range needles {
		c := n.lit[0]
		t[c] = append(t[c], n)
		if n.fold && 'a' <= c && c <= 'z' {
			t[c-'a'+'A'] = append(t[c-'a'+'A'], n)
		}
	}
	return t
}()

// mayHoldSecret says whether s holds a needle: when it does not, no
// pattern of Redact can match it.
func mayHoldSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		for _, n := range needlesAt[s[i]] {
			if n.fold && hasFoldPrefix(s[i:], n.lit) || !n.fold && strings.HasPrefix(s[i:], n.lit) {
				return true
			}
		}
	}
	return false
}

// hasFoldPrefix says whether s starts with lower, in any ASCII case.
func hasFoldPrefix(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
