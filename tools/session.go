package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/expose"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Session tools' names.
const (
	SessionOpenName  = contract.ToolSessionOpen
	SessionCloseName = contract.ToolSessionClose
	SessionListName  = contract.ToolSessionList
)

type principalKey struct{}

// LocalPrincipal is the one client of a stdio server, or of an HTTP
// server without named tokens.
const LocalPrincipal = "local"

// WithPrincipal marks ctx as a call by the client named p (over HTTP: the
// name of the bearer token it presented).
func WithPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf names the client a session belongs to: never the transport's
// session id, which a restarted server or client does not keep.
func PrincipalOf(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok && p != "" {
		return p
	}
	return LocalPrincipal
}

// SessionOpenArgs are session_open's arguments.
type SessionOpenArgs struct {
	Language           string   `json:"language" jsonschema:"required,description=The session's language: every run_code call in it must use the same."`
	IdleTTLSeconds     *float64 `json:"idle_ttl_seconds,omitempty" jsonschema:"description=Close the session after this long without a call (at most the server's)."`
	MaxLifetimeSeconds *float64 `json:"max_lifetime_seconds,omitempty" jsonschema:"description=Close the session this long after it opened (at most the server's)."`
	MemoryMiB          *int64   `json:"memory_mib,omitempty" jsonschema:"description=Memory of the session's box in MiB (at most the server's)."`
	Pids               *int64   `json:"pids,omitempty" jsonschema:"description=Most processes and threads in the session's box (at most the server's)."`
	Workspace          string   `json:"workspace,omitempty" jsonschema:"description=Name of your persistent workspace to use as /workspace (created if new): its files and packages installed with pip install --user or npm install stay for your next session that names it. One session at a time."`
}

// SessionIDArgs name one session.
type SessionIDArgs struct {
	SessionID string `json:"session_id" jsonschema:"required,description=The id session_open returned."`
}

// SessionListArgs are session_list's (none).
type SessionListArgs struct{}

// SessionResult is the structured answer of the session tools.
type SessionResult struct {
	Status   contract.Status        `json:"status" jsonschema:"enum=ok,enum=error"`
	Session  *contract.SessionInfo  `json:"session,omitempty" jsonschema:"description=The session opened."`
	Sessions []contract.SessionInfo `json:"sessions,omitempty" jsonschema:"description=The caller's open sessions."`
	Closed   bool                   `json:"closed,omitempty"`
	Error    *contract.ErrorInfo    `json:"error,omitempty"`
}

// statusOf is a tool answer's status: error when it carries one.
func statusOf(e *contract.ErrorInfo) contract.Status {
	if e != nil {
		return contract.StatusError
	}
	return contract.StatusOK
}

// errorText is how the session family of tools puts an error in words.
func errorText(e *contract.ErrorInfo) string {
	return fmt.Sprintf("error (%s): %s. %s", e.Kind, e.Message, e.Hint)
}

// textAnswer is a tool's answer of structured res and text, an error
// when e is set.
func textAnswer(res any, e *contract.ErrorInfo, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{StructuredContent: res, IsError: e != nil, Content: []mcp.Content{mcp.NewTextContent(text)}}
}

func sessionAnswer(res SessionResult) *mcp.CallToolResult {
	res.Status = statusOf(res.Error)
	text := "ok"
	switch {
	case res.Error != nil:
		text = errorText(res.Error)
	case res.Session != nil:
		text = fmt.Sprintf("session %s open (%s); pass it as run_code's session_id. It closes after %.0f s idle, at the latest at %s.",
			res.Session.ID, res.Session.Language, res.Session.IdleTTL, res.Session.EndsAt.UTC().Format(time.RFC3339))
		if w := res.Session.Workspace; w != "" {
			text += fmt.Sprintf("\nYour workspace %q is /workspace: what you keep there stays for your next session that names it.", w)
		}
		for _, r := range res.Session.Roots {
			text += fmt.Sprintf("\nYour root %s is at %s, read-only.", r.URI, r.Path)
		}
	case res.Closed:
		text = "session closed"
	default:
		text = fmt.Sprintf("%d open sessions", len(res.Sessions))
		for _, si := range res.Sessions {
			text += fmt.Sprintf("\n%s · %s · %d calls · expires %s", si.ID, si.Language, si.Calls, si.ExpiresAt.UTC().Format(time.RFC3339))
			for _, e := range si.Exposures {
				label := ""
				if e.Name != "" {
					label = " " + strconv.Quote(e.Name)
				}
				text += fmt.Sprintf("\n  box port %d%s open to the person at %s (exposure %s)", e.BoxPort, label, e.URL, e.ID)
			}
		}
	}
	return textAnswer(res, res.Error, text)
}

// withExposures names, in each of client's sessions, its open exposures
// of client's: the URL the person opens, where the agent finds it again.
func withExposures(sessions []contract.SessionInfo, set *expose.Set, client string) []contract.SessionInfo {
	for i, si := range sessions {
		for _, e := range set.URLs(client, si.ID) {
			sessions[i].Exposures = append(sessions[i].Exposures, contract.SessionExposure{ID: e.ID, Name: e.Name, BoxPort: e.BoxPort, URL: e.URL})
		}
	}
	return sessions
}

// arguments are a call's arguments as JSON; nil when they cannot be.
func arguments(req mcp.CallToolRequest) []byte {
	// The arguments as the client sent them, when mcp-go kept them: a
	// large call is not copied again.
	if raw, ok := req.GetRawArguments().(json.RawMessage); ok {
		return raw
	}
	raw, err := json.Marshal(req.GetRawArguments())
	if err != nil {
		return nil
	}
	return raw
}

// objectArguments are a call's arguments as JSON, {} when there are none.
func objectArguments(req mcp.CallToolRequest) []byte {
	raw := arguments(req)
	if raw == nil || string(raw) == "null" {
		return []byte("{}")
	}
	return raw
}

// decodeStrict reads a call's arguments into v: unknown fields are errors.
func decodeStrict(req mcp.CallToolRequest, v any) error {
	dec := json.NewDecoder(bytes.NewReader(objectArguments(req)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func sessionTool(name, title, desc string, args any, readOnly, destructive bool) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, mustJSON(reflectSchema(args)))
	t.Icons = Icons
	t.RawOutputSchema = mustJSON(reflectSchema(&SessionResult{}))
	t.Annotations = mcp.ToolAnnotation{Title: title, ReadOnlyHint: mcp.ToBoolPtr(readOnly), DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint: mcp.ToBoolPtr(readOnly), OpenWorldHint: mcp.ToBoolPtr(false)}
	return t
}

// SessionTools are session_open, session_close and session_list, when the
// manifest enables sessions and the runner keeps them.
func SessionTools(d Deps) []server.ServerTool {
	m := d.Manifest
	sr := d.Runner.Sessions()
	if !m.Sessions.Enabled || sr == nil {
		return nil
	}
	s, sl := m.Sessions, m.SessionLimits()
	openDesc := fmt.Sprintf("Open a session: a sandbox whose interpreter keeps its state between run_code calls (pass the returned session_id), like a notebook. "+
		"Use it for iterative work: load data or do slow imports once, then explore it over many calls. For a one-off computation, call run_code without a session.\n\n"+
		"Python keeps globals, imports and loaded data (a cell's last expression is shown, as in a notebook); JavaScript and TypeScript keep top-level declarations and globals (top-level await works; a TypeScript cell is type-checked against the earlier cells first); bash keeps variables, functions and the working directory; /workspace persists.\n"+
		"Limits: memory %s, %d processes/threads, /workspace %s, each call's own timeout as run_code's. A session closes after %gs without a call and at the latest %gs after it opened; at most %d open sessions per client, %d on the server.\n"+
		"A call that times out or runs out of memory loses the session's state (error.kind session_lost on later calls): open a new one and re-run the set-up code.",
		sl.Memory, sl.Pids, sl.WorkspaceBytes, s.IdleTTLSeconds, s.MaxLifetimeSeconds, s.MaxPerClient, s.MaxOpen) + workspaceParagraph(m)
	open := sessionTool(SessionOpenName, "Open a sandbox session", openDesc, &SessionOpenArgs{}, false, false)
	closeT := sessionTool(SessionCloseName, "Close a sandbox session", "Close a session opened with session_open: its sandbox and all its state are removed.", &SessionIDArgs{}, false, true)
	listDesc := "List your open sessions: id, language, calls so far and when each expires."
	if d.Exposures.Enabled() {
		listDesc = "List your open sessions: id, language, calls so far, when each expires, and the URLs of its web servers open to the person (session_expose)."
	}
	list := sessionTool(SessionListName, "List my sandbox sessions", listDesc, &SessionListArgs{}, true, false)
	return []server.ServerTool{
		{Tool: open, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SessionOpenArgs
			if err := decodeStrict(req, &a); err != nil {
				return sessionAnswer(SessionResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			sreq, bad := validateOpen(m, a)
			if bad != nil {
				return sessionAnswer(SessionResult{Error: bad}), nil
			}
			sreq.Client = PrincipalOf(ctx)
			roots, ask := clientRoots(ctx, m, req, d.Logger)
			if ask != nil {
				return ask, nil
			}
			sreq.Mounts = roots
			info, fail := sr.OpenSession(ctx, sreq)
			if fail != nil {
				return sessionAnswer(SessionResult{Error: fail}), nil
			}
			return sessionAnswer(SessionResult{Session: &info}), nil
		}},
		{Tool: closeT, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SessionIDArgs
			if err := decodeStrict(req, &a); err != nil {
				return sessionAnswer(SessionResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			if fail := sr.CloseSession(ctx, a.SessionID, PrincipalOf(ctx)); fail != nil {
				return sessionAnswer(SessionResult{Error: fail}), nil
			}
			return sessionAnswer(SessionResult{Closed: true}), nil
		}},
		{Tool: list, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SessionListArgs
			if err := decodeStrict(req, &a); err != nil {
				return sessionAnswer(SessionResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			client := PrincipalOf(ctx)
			return sessionAnswer(SessionResult{Sessions: withExposures(sr.ListSessions(client), d.Exposures, client)}), nil
		}},
	}
}

// validateOpen checks session_open's arguments against the manifest.
func validateOpen(m *manifest.Manifest, a SessionOpenArgs) (sandbox.SessionRequest, *contract.ErrorInfo) {
	lang, ok := m.Language(a.Language)
	if !ok {
		return sandbox.SessionRequest{}, invalid("unknown language %q: use one of %v", a.Language, m.LanguageNames())
	}
	req := sandbox.SessionRequest{Language: lang, Limits: m.SessionLimits()}
	s := m.Sessions
	if v := a.IdleTTLSeconds; v != nil {
		if *v <= 0 || *v > s.IdleTTLSeconds {
			return req, invalid("idle_ttl_seconds must be more than 0 and at most %g", s.IdleTTLSeconds)
		}
		req.IdleTTL = time.Duration(*v * float64(time.Second))
	}
	if v := a.MaxLifetimeSeconds; v != nil {
		if *v <= 0 || *v > s.MaxLifetimeSeconds {
			return req, invalid("max_lifetime_seconds must be more than 0 and at most %g", s.MaxLifetimeSeconds)
		}
		req.Lifetime = time.Duration(*v * float64(time.Second))
	}
	if v := a.MemoryMiB; v != nil {
		max := int64(req.Limits.Memory) >> 20
		if *v < 16 || *v > max {
			return req, invalid("memory_mib must be from 16 to %d", max)
		}
		req.Limits.Memory = manifest.ByteSize(*v << 20)
	}
	if v := a.Pids; v != nil {
		if *v < 8 || *v > req.Limits.Pids {
			return req, invalid("pids must be from 8 to %d", req.Limits.Pids)
		}
		req.Limits.Pids = *v
	}
	if a.Workspace != "" {
		if !m.Workspaces.Enabled {
			return req, invalid("named workspaces are off on this server (manifest workspaces.enabled)")
		}
		if !manifest.ValidWorkspaceName(a.Workspace) {
			return req, invalid("workspace %q is not a valid name: 1 to 32 of a-z, 0-9, '-' and '_', starting with a letter or digit", a.Workspace)
		}
		req.Workspace = a.Workspace
	}
	return req, nil
}
