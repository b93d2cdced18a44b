//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

const readmeBin = "/path/to/runbox/bin/runbox"

var snippetRe = regexp.MustCompile("(?s)<!-- snippet:([a-z0-9-]+) -->\\s*```[a-z]*\\n(.*?)```")

func readmeSnippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range snippetRe.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

type serverEntry struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

func entry(t *testing.T, snippet, key string) serverEntry {
	t.Helper()
	var cfg map[string]map[string]serverEntry
	if err := json.Unmarshal([]byte(snippet), &cfg); err != nil {
		t.Fatalf("snippet is not valid JSON: %v\n%s", err, snippet)
	}
	e, ok := cfg[key]["runbox"]
	if !ok {
		t.Fatalf("snippet has no %s.runbox", key)
	}
	return e
}

func smokeCall(t *testing.T, c *client.Client) {
	t.Helper()
	if err := initialize(c); err != nil {
		t.Fatal(err)
	}
	if r := callOn(t, c, map[string]any{"language": "bash", "code": "echo from-readme"}); r.Stdout != "from-readme\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
}

// TestReadmeSnippets runs the README's client configurations as written,
// with only the binary's path and the port replaced.
func TestReadmeSnippets(t *testing.T) {
	sn := readmeSnippets(t)
	for _, name := range []string{"claude-desktop-stdio", "claude-code-stdio", "vscode-stdio", "serve-http", "vscode-http", "claude-code-http"} {
		if sn[name] == "" {
			t.Fatalf("README lacks snippet %s", name)
		}
	}
	stdio := []serverEntry{entry(t, sn["claude-desktop-stdio"], "mcpServers"), entry(t, sn["vscode-stdio"], "servers")}
	for _, e := range stdio {
		if e.Command != readmeBin {
			t.Fatalf("command %q", e.Command)
		}
		c, err := client.NewStdioMCPClient(runboxBin, nil, e.Args...)
		if err != nil {
			t.Fatal(err)
		}
		smokeCall(t, c)
		c.Close()
		if got, want := strings.TrimSpace(sn["claude-code-stdio"]), "claude mcp add runbox -- "+e.Command+" "+strings.Join(e.Args, " "); got != want {
			t.Errorf("claude code snippet %q does not match %q", got, want)
		}
	}

	// Start the server exactly as the README says, on a free port.
	line := strings.TrimSpace(sn["serve-http"])
	fields := strings.Fields(line)
	env, argv := fields[0], fields[1:]
	if argv[0] != readmeBin || !strings.HasPrefix(env, "RUNBOX_AUTH_TOKEN=") {
		t.Fatalf("serve snippet: %q", line)
	}
	token := strings.TrimPrefix(env, "RUNBOX_AUTH_TOKEN=")
	addr := freeAddr(t)
	args := strings.Fields(strings.ReplaceAll(strings.Join(argv[1:], " "), "127.0.0.1:8080", addr))
	cmd := exec.Command(runboxBin, args...)
	cmd.Env = append(os.Environ(), env)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()

	h := entry(t, sn["vscode-http"], "servers")
	if h.Type != "http" || h.Headers["Authorization"] != "Bearer "+token {
		t.Fatalf("vscode http entry %+v does not carry the serve snippet's token", h)
	}
	want := "claude mcp add --transport http runbox " + h.URL + ` --header "Authorization: ` + h.Headers["Authorization"] + `"`
	if got := strings.TrimSpace(sn["claude-code-http"]); got != want {
		t.Errorf("claude code http snippet %q, want %q", got, want)
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := client.NewStreamableHttpClient(strings.ReplaceAll(h.URL, "127.0.0.1:8080", addr), transport.WithHTTPHeaders(h.Headers))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	smokeCall(t, c)
}
