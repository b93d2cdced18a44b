package clientconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPath(t *testing.T) {
	mac := Platform{GOOS: "darwin", Home: "/Users/ada"}
	win := Platform{GOOS: "windows", Home: `C:\Users\ada`, Getenv: func(k string) string {
		if k == "APPDATA" {
			return `C:\Users\ada\AppData\Roaming`
		}
		return ""
	}}
	winNoEnv := Platform{GOOS: "windows", Home: `C:\Users\ada`}
	linux := Platform{GOOS: "linux", Home: "/home/ada"}
	linuxXDG := Platform{GOOS: "linux", Home: "/home/ada", Getenv: func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return "/home/ada/.cfg"
		}
		return ""
	}}
	for _, tc := range []struct {
		c    Client
		p    Platform
		want string
	}{
		{ClaudeDesktop, mac, "/Users/ada/Library/Application Support/Claude/claude_desktop_config.json"},
		{ClaudeDesktop, win, `C:\Users\ada\AppData\Roaming\Claude\claude_desktop_config.json`},
		{ClaudeDesktop, winNoEnv, `C:\Users\ada\AppData\Roaming\Claude\claude_desktop_config.json`},
		{ClaudeDesktop, linux, "/home/ada/.config/Claude/claude_desktop_config.json"},
		{ClaudeDesktop, linuxXDG, "/home/ada/.cfg/Claude/claude_desktop_config.json"},
		{ClaudeCode, mac, "/Users/ada/.claude.json"},
		{ClaudeCode, win, `C:\Users\ada\.claude.json`},
		{ClaudeCode, linux, "/home/ada/.claude.json"},
		{VSCode, mac, "/Users/ada/Library/Application Support/Code/User/mcp.json"},
		{VSCode, win, `C:\Users\ada\AppData\Roaming\Code\User\mcp.json`},
		{VSCode, linux, "/home/ada/.config/Code/User/mcp.json"},
		{VSCode, linuxXDG, "/home/ada/.cfg/Code/User/mcp.json"},
	} {
		got, err := Path(tc.c, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("Path(%s, %s) = %q, %v; want %q", tc.c, tc.p.GOOS, got, err, tc.want)
		}
	}
	if _, err := Path("cursor", mac); err == nil || !strings.Contains(err.Error(), "claude-desktop") {
		t.Errorf("unknown client: %v", err)
	}
}

// TestPathMSIX: an MSIX-packaged Claude Desktop on Windows reads its file
// from its package's virtualised AppData, not from %APPDATA%.
func TestPathMSIX(t *testing.T) {
	var asked string
	p := Platform{GOOS: "windows", Home: `C:\Users\ada`, Getenv: func(k string) string {
		return map[string]string{"APPDATA": `C:\Users\ada\AppData\Roaming`, "LOCALAPPDATA": `D:\Local`}[k]
	}, Glob: func(pattern string) ([]string, error) {
		asked = pattern
		return []string{`D:\Local\Packages\Claude_pzs8sxrjxfjjc`}, nil
	}}
	got, err := Path(ClaudeDesktop, p)
	if err != nil || got != `D:\Local\Packages\Claude_pzs8sxrjxfjjc\LocalCache\Roaming\Claude\claude_desktop_config.json` || asked != `D:\Local\Packages\Claude_*` {
		t.Fatalf("got %q (asked %q), %v", got, asked, err)
	}
	// No package: the classic install's file.
	p.Glob = func(string) ([]string, error) { return nil, nil }
	if got, _ := Path(ClaudeDesktop, p); got != `C:\Users\ada\AppData\Roaming\Claude\claude_desktop_config.json` {
		t.Fatalf("without a package: %q", got)
	}
	// Other clients never look.
	p.Glob = func(string) ([]string, error) { t.Fatal("VS Code looked for Claude's package"); return nil, nil }
	_, _ = Path(VSCode, p)
}

var srv = Server{Command: "/opt/homebrew/bin/runbox", Args: []string{"serve"}}

// Other servers and settings stay, in their order and as written.
func TestMergeKeepsOthers(t *testing.T) {
	in := `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/ada"]},
    "github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"}}
  },
  "zeta": [1, 2.50, {"n": null}]
}`
	out, replaced, err := Merge(ClaudeDesktop, []byte(in), "runbox", srv)
	if err != nil || replaced {
		t.Fatalf("Merge: %v, replaced %v", err, replaced)
	}
	var got struct {
		GlobalShortcut string                     `json:"globalShortcut"`
		MCPServers     map[string]json.RawMessage `json:"mcpServers"`
		Zeta           json.RawMessage            `json:"zeta"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if got.GlobalShortcut != "Ctrl+Space" || len(got.MCPServers) != 3 {
		t.Fatalf("lost something:\n%s", out)
	}
	if !strings.Contains(string(out), `2.50`) {
		t.Errorf("a number was rewritten:\n%s", out)
	}
	s := string(out)
	if !(strings.Index(s, "globalShortcut") < strings.Index(s, "filesystem") && strings.Index(s, "filesystem") < strings.Index(s, "github") &&
		strings.Index(s, "github") < strings.Index(s, `"runbox"`) && strings.Index(s, `"runbox"`) < strings.Index(s, "zeta")) {
		t.Errorf("order changed:\n%s", out)
	}
	var entry struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	if err := json.Unmarshal(got.MCPServers["runbox"], &entry); err != nil || entry.Command != srv.Command || len(entry.Args) != 1 || entry.Type != "" {
		t.Fatalf("entry %s: %v", got.MCPServers["runbox"], err)
	}
	// Merging again replaces runbox's entry only.
	srv2 := Server{Command: "/usr/local/bin/runbox", Args: []string{"serve", "--manifest", "/etc/runbox.yaml"}, Env: map[string]string{"DOCKER_HOST": "unix:///x.sock"}}
	out2, replaced, err := Merge(ClaudeDesktop, out, "runbox", srv2)
	if err != nil || !replaced {
		t.Fatalf("second Merge: %v, replaced %v", err, replaced)
	}
	if strings.Count(string(out2), `"runbox"`) != 1 || !strings.Contains(string(out2), "/etc/runbox.yaml") || !strings.Contains(string(out2), "DOCKER_HOST") ||
		!strings.Contains(string(out2), "GITHUB_PERSONAL_ACCESS_TOKEN") {
		t.Fatalf("second merge:\n%s", out2)
	}
}

func TestMergeShapes(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		c        Client
		want     string // a substring of the output
		err      string
	}{
		{"empty file", "", ClaudeDesktop, `"mcpServers": {`, ""},
		{"whitespace", " \n", ClaudeDesktop, `"mcpServers": {`, ""},
		{"no servers yet", `{"theme":"dark"}`, ClaudeCode, `"type": "stdio"`, ""},
		{"servers null", `{"mcpServers":null}`, ClaudeDesktop, `"runbox"`, ""},
		{"vscode", `{"inputs":[],"servers":{"memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"]}}}`, VSCode, `"servers": {`, ""},
		{"byte order mark", "\xef\xbb\xbf{}", ClaudeDesktop, `"runbox"`, ""},
		{"malformed", `{"mcpServers": {"a": 1,}}`, ClaudeDesktop, "", "invalid character"},
		{"truncated", `{"mcpServers": {`, ClaudeDesktop, "", "unexpected end"},
		{"comments", "// mine\n{}", VSCode, "", "invalid character"},
		{"not an object", `[1]`, ClaudeDesktop, "", "not a JSON object"},
		{"servers not an object", `{"mcpServers": []}`, ClaudeDesktop, "", "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Merge(tc.c, []byte(tc.in), "runbox", srv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !strings.Contains(string(out), tc.want) || !json.Valid(out) {
				t.Fatalf("Merge: %v\n%s", err, out)
			}
		})
	}
}

// A missing directory is created; the file's mode is kept on a rewrite;
// a malformed file is left byte for byte.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "Library", "Application Support", "Claude", "claude_desktop_config.json")
	if _, err := Write(ClaudeDesktop, p, "runbox", srv); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), srv.Command) {
		t.Fatalf("%s: %v", b, err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if replaced, err := Write(ClaudeDesktop, p, "runbox", srv); err != nil || !replaced {
		t.Fatalf("rewrite: %v, replaced %v", err, replaced)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after a rewrite", st.Mode().Perm())
	}
	bad := filepath.Join(dir, "bad.json")
	const content = `{"mcpServers": {"other": {"command": "x"},}}`
	if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Write(ClaudeDesktop, bad, "runbox", srv)
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") || !strings.Contains(err.Error(), "left as it is") {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(bad); string(b) != content {
		t.Fatalf("malformed file changed: %s", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left temporary files: %v", entries)
	}
}

func TestSnippet(t *testing.T) {
	var got map[string]map[string]map[string]any
	if err := json.Unmarshal(Snippet(VSCode, "runbox", srv), &got); err != nil {
		t.Fatal(err)
	}
	e := got["servers"]["runbox"]
	if e["type"] != "stdio" || e["command"] != srv.Command {
		t.Fatalf("snippet %v", got)
	}
}
