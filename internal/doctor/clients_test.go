package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/internal/clientconfig"
)

func TestClientChecks(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "runbox")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[clientconfig.Client]string{
		clientconfig.ClaudeDesktop: filepath.Join(dir, "desktop.json"),
		clientconfig.ClaudeCode:    filepath.Join(dir, "code.json"),
		clientconfig.VSCode:        filepath.Join(dir, "absent.json"),
	}
	find := func(c clientconfig.Client) (string, error) { return files[c], nil }
	checks := clientChecks(find, "runbox")
	if len(checks) != 1 || checks[0].Status != Warn || !strings.Contains(checks[0].Detail, "does not exist") {
		t.Fatalf("nothing written: %+v", checks)
	}
	if _, err := clientconfig.Write(clientconfig.ClaudeDesktop, files[clientconfig.ClaudeDesktop], "runbox", clientconfig.Server{Command: bin, Args: []string{"serve"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[clientconfig.ClaudeCode], []byte(`{"mcpServers":{"runbox":{"command":"/gone/runbox","args":["serve"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	checks = clientChecks(find, "runbox")
	if len(checks) != 2 || checks[0].Status != OK || !strings.Contains(checks[0].Detail, bin) ||
		checks[1].Status != Warn || !strings.Contains(checks[1].Detail, "/gone/runbox") || checks[1].Fix != "runbox config claude-code --write" {
		t.Fatalf("%+v", checks)
	}
}
