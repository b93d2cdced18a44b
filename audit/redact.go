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
