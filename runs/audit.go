package runs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// AuditEntry is the audit line of one call: who made it, its arguments
// and its result.
func AuditEntry(m *manifest.Manifest, transport string, call Call, res contract.Result) audit.Entry {
	args, raw := call.Args, call.Raw
	if raw == nil && call.Bad == nil && m.Audit.StoreCode {
		raw, _ = json.Marshal(args)
	}
	code := sha256.Sum256([]byte(args.Code))
	timeout := m.Limits.TimeoutSeconds
	if args.TimeoutSeconds != nil {
		timeout = *args.TimeoutSeconds
	}
	e := audit.Entry{
		RunID: res.RunID, Time: time.Now().UTC(), Client: call.App, Transport: transport,
		Language: res.Language, CodeSHA256: hex.EncodeToString(code[:]),
		Image: res.Image, Isolation: res.Isolation,
		Limits: audit.Limits{TimeoutSeconds: timeout, MemoryBytes: int64(m.Limits.Memory), CPUs: m.Limits.CPUs,
			Pids: m.Limits.Pids, OutputBytes: int64(m.Limits.OutputBytes)},
		Metrics: res.Metrics, Status: res.Status, ExitCode: res.ExitCode,
		Artifacts:    make([]audit.Artifact, len(res.Artifacts)),
		StdoutSHA256: sum(res.Stdout), StderrSHA256: sum(res.Stderr),
	}
	if id := args.SessionID; id != "" {
		key := sandbox.SessionKey(id)
		e.Session = &audit.Session{Key: key}
		if res.Session != nil {
			e.Session.Call, e.Session.State = res.Session.Call, res.Session.State
		}
		// The id is a capability: the log keeps its key only.
		raw = bytes.ReplaceAll(raw, []byte(id), []byte(key))
	}
	e.Client.Principal = call.Client
	if m.Audit.StoreCode && json.Valid(raw) {
		e.Args = raw
	}
	redact := func(s string) string {
		r, n := audit.Redact(s)
		e.Redacted += n
		return r
	}
	e.StdoutHead, e.StderrHead = redact(head(res.Stdout)), redact(head(res.Stderr))
	if res.Error != nil {
		e.Error = &audit.Error{Kind: res.Error.Kind, Limit: res.Error.Limit, Syscall: res.Error.Syscall, Message: redact(res.Error.Message)}
	}
	for _, c := range res.Network {
		c.Reason = redact(c.Reason)
		e.Network = append(e.Network, c)
	}
	for i, a := range res.Artifacts {
		e.Artifacts[i] = audit.Artifact{Path: redact(a.Path), SizeBytes: a.SizeBytes, MimeType: a.MimeType, SHA256: a.SHA256}
	}
	return e
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// head is the first audit.HeadBytes of s.
func head(s string) string {
	if len(s) <= audit.HeadBytes {
		return s
	}
	return strings.TrimRight(cut(s, audit.HeadBytes), "\n") + "…"
}

// cut is the first n bytes of s, shortened to valid UTF-8.
func cut(s string, n int) string {
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
