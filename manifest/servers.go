package manifest

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Server is an MCP server runbox connects to as a client, so that code in
// a box can call its tools (tools.<name>.<tool>(...)). Exactly one of
// Command (stdio) and URL (streamable HTTP) is set. Secrets come from the
// host's environment by name and go only to the server, never to a box.
type Server struct {
	Name string `json:"name" jsonschema_description:"The name code uses: tools.<name>.<tool>(...); lower-case letters, digits and _ (- is allowed and reads as _ in code)."`
	// Command starts a stdio server; Args are its arguments.
	Command string   `json:"command,omitempty" jsonschema_description:"A stdio server: the command runbox starts (with the host's environment plus env)."`
	Args    []string `json:"args,omitempty" jsonschema_description:"The stdio server's arguments."`
	// Env maps a variable of the server's environment to the name of the
	// host variable that holds its value.
	Env map[string]string `json:"env,omitempty" jsonschema_description:"Variables set for the stdio server, each taken from the host variable named (e.g. GITHUB_TOKEN: RUNBOX_GITHUB_TOKEN); never given to a box."`
	// URL is a streamable HTTP server's endpoint.
	URL string `json:"url,omitempty" jsonschema_description:"A streamable HTTP server: its MCP endpoint (http:// or https://)."`
	// Headers maps a request header to the name of the host variable
	// that holds its value.
	Headers map[string]string `json:"headers,omitempty" jsonschema_description:"HTTP headers sent to the server, each taken from the host variable named (e.g. Authorization: RUNBOX_API_AUTH)."`
	// Connect is when runbox connects: startup or first_use.
	Connect string `json:"connect,omitempty" jsonschema:"enum=startup,enum=first_use" jsonschema_description:"startup (default): connect when runbox starts, so run_code can name the server's tools; first_use: when code first calls it."`
	// Allow, Deny and Ask are globs over the server's tool names: a tool
	// denied is never called; one to ask about needs the user's yes (MCP
	// elicitation) for each call; with Allow set, only the tools it names
	// can be called. Deny comes before Ask, Ask before Allow. A glob
	// matches the name as the server spells it and as code calls it
	// (get-env and get_env): upstream applies them.
	Allow []string `json:"allow,omitempty" jsonschema_description:"Globs of the tools code may call (empty: all that are not denied)."`
	Deny  []string `json:"deny,omitempty" jsonschema_description:"Globs of the tools code may never call."`
	Ask   []string `json:"ask,omitempty" jsonschema_description:"Globs of the tools whose every call the user must approve (MCP elicitation with the arguments); a client without elicitation refuses them."`
}

// Connect modes.
const (
	ConnectStartup  = "startup"
	ConnectFirstUse = "first_use"
)

// Tool policies.
const (
	PolicyAllow = "allow"
	PolicyDeny  = "deny"
	PolicyAsk   = "ask"
)

// Policy says what a call of tool may do: allow, deny or ask.
func (s Server) Policy(tool string) string {
	match := func(globs []string) bool {
		return slices.ContainsFunc(globs, func(g string) bool { ok, _ := path.Match(g, tool); return ok })
	}
	switch {
	case match(s.Deny):
		return PolicyDeny
	case match(s.Ask):
		return PolicyAsk
	case len(s.Allow) > 0 && !match(s.Allow):
		return PolicyDeny
	}
	return PolicyAllow
}

// ToolCalls bounds the calls of one run's code to the servers.
type ToolCalls struct {
	MaxCalls int `json:"max_calls" jsonschema_description:"Most tool calls one run may make; past it a call raises a limit error in the code."`
	// MaxBytes bounds arguments and results together.
	MaxBytes           ByteSize `json:"max_bytes" jsonschema_description:"Most bytes of arguments sent and results received by one run's tool calls together."`
	CallTimeoutSeconds float64  `json:"call_timeout_seconds" jsonschema_description:"Longest a single tool call may take; it is cancelled upstream after."`
	// MaxSeconds bounds the time one run's calls take together.
	MaxSeconds float64 `json:"max_seconds" jsonschema_description:"Most seconds one run's tool calls may take together (0: only the run's own timeout); past it a call raises a limit error."`
}

// SavedTools lets clients keep good code as tools of its own (save_tool).
type SavedTools struct {
	Enabled bool `json:"enabled" jsonschema_description:"Offers save_tool and delete_tool: a snippet saved with a name, description and input schema becomes a tool that runs it in a fresh box with the call's arguments (tools/list_changed); saved tools survive a restart. Off: neither is offered, and tools saved before are not served."`
	// Dir is where they are kept; empty means the user's state directory.
	Dir string `json:"dir" jsonschema_description:"Where saved tools are kept, one directory per tool with a file per version; empty: $XDG_STATE_HOME/runbox/tools (~/.local/state/runbox/tools)."`
}

// CallTimeout is the longest a tool call may take.
func (t ToolCalls) CallTimeout() time.Duration { return seconds(t.CallTimeoutSeconds) }

// reservedServerNames are runbox_tools' own attributes.
var reservedServerNames = []string{"call", "list", "servers"}

var serverNameRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// validateServers checks the servers and the tool-call bounds.
func (m *Manifest) validateServers(bad func(field string, value any, allowed string)) {
	seen := map[string]bool{}
	for i, s := range m.Servers {
		f := fmt.Sprintf("servers[%d]", i)
		switch {
		case !serverNameRe.MatchString(s.Name):
			bad(f+".name", s.Name, "lower-case letters, digits, _ and -, at most 32, starting with a letter")
		case seen[identifier(s.Name)]:
			bad(f+".name", s.Name, "unique (with - read as _)")
		case slices.Contains(reservedServerNames, identifier(s.Name)):
			bad(f+".name", s.Name, "not one of the libraries' own names ("+strings.Join(reservedServerNames, ", ")+")")
		}
		seen[identifier(s.Name)] = true
		switch {
		case (s.Command == "") == (s.URL == ""):
			bad(f, s.Name, "exactly one of command (stdio) and url (streamable HTTP)")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(f+".url", s.URL, "an http:// or https:// URL")
			}
			if len(s.Env) > 0 || len(s.Args) > 0 {
				bad(f, s.Name, "env and args only with command")
			}
		default:
			if len(s.Headers) > 0 {
				bad(f+".headers", s.Headers, "only with url")
			}
		}
		if s.Connect != "" && s.Connect != ConnectStartup && s.Connect != ConnectFirstUse {
			bad(f+".connect", s.Connect, "startup or first_use")
		}
		for _, g := range slices.Concat(s.Allow, s.Deny, s.Ask) {
			if _, err := path.Match(g, ""); err != nil {
				bad(f+".allow/deny/ask", g, "a glob (* ? [...])")
			}
		}
	}
	t := m.ToolCalls
	if t.MaxCalls < 1 || t.MaxCalls > 1e6 {
		bad("tool_calls.max_calls", t.MaxCalls, "from 1 to 1000000")
	}
	if t.MaxBytes < 1*KiB || t.MaxBytes > 16*GiB {
		bad("tool_calls.max_bytes", t.MaxBytes, "from 1KiB to 16GiB")
	}
	if !(t.MaxSeconds >= 0 && t.MaxSeconds <= 86400) {
		bad("tool_calls.max_seconds", t.MaxSeconds, "from 0 to 86400")
	}
	if !(t.CallTimeoutSeconds >= 0.1 && t.CallTimeoutSeconds <= 3600) {
		bad("tool_calls.call_timeout_seconds", t.CallTimeoutSeconds, "from 0.1 to 3600")
	}
}

// identifier is a name as code spells it: - and . read as _.
func identifier(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == '-' || c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}
