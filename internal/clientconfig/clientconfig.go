package clientconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Client is an MCP client whose configuration runbox can write.
type Client string

// Clients runbox knows.
const (
	ClaudeDesktop Client = "claude-desktop"
	ClaudeCode    Client = "claude-code"
	VSCode        Client = "vscode"
)

// Clients lists every Client, for flags and messages.
var Clients = []Client{ClaudeDesktop, ClaudeCode, VSCode}

// Platform is what a client's file location depends on.
type Platform struct {
	// GOOS is linux, darwin or windows.
	GOOS string
	// Home is the user's home directory.
	Home string
	// Getenv reads APPDATA and LOCALAPPDATA (Windows) and XDG_CONFIG_HOME
	// (Linux); nil reads nothing.
	Getenv func(string) string
	// Glob finds installed packages (filepath.Glob); nil finds none.
	Glob func(pattern string) ([]string, error)
}

func (p Platform) env(k string) string {
	if p.Getenv == nil {
		return ""
	}
	return p.Getenv(k)
}

// Path is where the client reads its MCP servers on this platform.
func Path(c Client, p Platform) (string, error) {
	join := func(elem ...string) string {
		if p.GOOS == "windows" {
			return strings.Join(elem, `\`)
		}
		return path.Join(elem...)
	}
	appData := p.env("APPDATA")
	if appData == "" && p.GOOS == "windows" {
		appData = join(p.Home, "AppData", "Roaming")
	}
	xdg := p.env("XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = join(p.Home, ".config")
	}
	switch c {
	case ClaudeDesktop:
		switch p.GOOS {
		case "darwin":
			return join(p.Home, "Library", "Application Support", "Claude", "claude_desktop_config.json"), nil
		case "windows":
			if pkg := p.msixPackage(); pkg != "" {
				return join(pkg, "LocalCache", "Roaming", "Claude", "claude_desktop_config.json"), nil
			}
			return join(appData, "Claude", "claude_desktop_config.json"), nil
		default:
			// No official Linux build; the community's builds read this.
			return join(xdg, "Claude", "claude_desktop_config.json"), nil
		}
	case ClaudeCode:
		// The user scope (`claude mcp add --scope user`), on every platform.
		return join(p.Home, ".claude.json"), nil
	case VSCode:
		switch p.GOOS {
		case "darwin":
			return join(p.Home, "Library", "Application Support", "Code", "User", "mcp.json"), nil
		case "windows":
			return join(appData, "Code", "User", "mcp.json"), nil
		default:
			return join(xdg, "Code", "User", "mcp.json"), nil
		}
	}
	return "", fmt.Errorf("unknown client %q: use claude-desktop, claude-code or vscode", c)
}

// msixPackage is the folder of Claude Desktop's MSIX package on Windows,
// or "": since February 2026 Claude Desktop installs as an MSIX package,
// whose file system is virtualised, so it reads its configuration under
// %LOCALAPPDATA%\Packages\Claude_<publisher>\LocalCache\Roaming\Claude,
// not %APPDATA%\Claude (anthropics/claude-code#26073). With more than
// one such folder, the first in name order.
func (p Platform) msixPackage() string {
	if p.Glob == nil {
		return ""
	}
	local := p.env("LOCALAPPDATA")
	if local == "" {
		local = p.Home + `\AppData\Local`
	}
	found, err := p.Glob(local + `\Packages\Claude_*`)
	if err != nil || len(found) == 0 {
		return ""
	}
	slices.Sort(found)
	return found[0]
}

// Server is the entry that starts runbox over stdio.
type Server struct {
	Command string
	Args    []string
	// Env is passed to the server (e.g. DOCKER_HOST); nil for none.
	Env map[string]string
}

// serversKey is the object that holds the client's servers.
func serversKey(c Client) string {
	if c == VSCode {
		return "servers"
	}
	return "mcpServers"
}

// Entry is the server's JSON object as the client reads it.
func Entry(c Client, s Server) json.RawMessage {
	type entry struct {
		Type    string            `json:"type,omitempty"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env,omitempty"`
	}
	e := entry{Command: s.Command, Args: s.Args, Env: s.Env}
	if e.Args == nil {
		e.Args = []string{}
	}
	if c != ClaudeDesktop {
		// Claude Code and VS Code name the transport.
		e.Type = "stdio"
	}
	b, _ := json.Marshal(e)
	return b
}

// Snippet is a whole file holding only this server, for printing.
func Snippet(c Client, name string, s Server) []byte {
	doc := object{{serversKey(c), mustJSON(object{{name, Entry(c, s)}})}}
	return doc.indent()
}

// Merge puts the server into the file's content (empty: a new file) and
// returns the new content and whether an entry of that name was replaced.
// Everything else stays as it was, in its order.
func Merge(c Client, content []byte, name string, s Server) ([]byte, bool, error) {
	var doc object
	// Windows editors may start the file with a byte order mark.
	content = bytes.TrimPrefix(content, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(content)) > 0 {
		var err error
		if doc, err = parseObject(content); err != nil {
			return nil, false, err
		}
	}
	key := serversKey(c)
	var servers object
	if raw, ok := doc.get(key); ok && !isNull(raw) {
		var err error
		if servers, err = parseObject(raw); err != nil {
			return nil, false, fmt.Errorf("%q: %w", key, err)
		}
	}
	_, replaced := servers.get(name)
	servers = servers.set(name, Entry(c, s))
	doc = doc.set(key, mustJSON(servers))
	return doc.indent(), replaced, nil
}

// Write merges the server into the file at p: the directory is created
// when missing, and the file is replaced atomically with its old mode.
// A file that is not a JSON object is left as it is.
func Write(c Client, p, name string, s Server) (replaced bool, err error) {
	old, err := os.ReadFile(p)
	mode := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return false, err
	default:
		if st, err := os.Stat(p); err == nil {
			mode = st.Mode().Perm()
		}
	}
	out, replaced, err := Merge(c, old, name, s)
	if err != nil {
		return false, fmt.Errorf("%s is not valid JSON (%w); it was left as it is: fix it, or add the entry by hand (runbox config %s prints it)", p, err, c)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	return replaced, os.Rename(tmp.Name(), p)
}

// object is a JSON object that keeps its members' order and their values
// as written.
type object []member

type member struct {
	key   string
	value json.RawMessage
}

func (o object) get(k string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == k {
			return m.value, true
		}
	}
	return nil, false
}

func (o object) set(k string, v json.RawMessage) object {
	for i, m := range o {
		if m.key == k {
			o[i].value = v
			return o
		}
	}
	return append(o, member{k, v})
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o object) indent() []byte {
	var b bytes.Buffer
	_ = json.Indent(&b, mustJSON(o), "", "  ")
	b.WriteByte('\n')
	return b.Bytes()
}

// parseObject reads a JSON object, keeping its members' order. A key that
// appears twice keeps its last value, as JSON parsers do.
func parseObject(data []byte) (object, error) {
	if !json.Valid(data) {
		var v any
		return nil, json.Unmarshal(data, &v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = o.set(k, v)
	}
	return o, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only objects of raw JSON values: cannot happen
	}
	return b
}

// Lookup reads the entry named name from the client's file content: the
// server it starts, and whether there is one.
func Lookup(c Client, content []byte, name string) (Server, bool, error) {
	content = bytes.TrimPrefix(content, []byte("\xef\xbb\xbf"))
	doc, err := parseObject(content)
	if err != nil {
		return Server{}, false, err
	}
	raw, ok := doc.get(serversKey(c))
	if !ok || isNull(raw) {
		return Server{}, false, nil
	}
	servers, err := parseObject(raw)
	if err != nil {
		return Server{}, false, err
	}
	raw, ok = servers.get(name)
	if !ok {
		return Server{}, false, nil
	}
	var e struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return Server{}, true, fmt.Errorf("%q: %w", name, err)
	}
	return Server{Command: e.Command, Args: e.Args, Env: e.Env}, true, nil
}
