// Command mcpb writes the manifest.json and icon.png of runbox's MCP bundle
// (.mcpb, for Claude Desktop's one-step install) for one platform; the
// release (scripts/release.sh bundles) puts them beside the platform's
// binaries and packs them with @anthropic-ai/mcpb, which validates the
// manifest. The tools it lists are the server's own, as it registers them.
//
//	go run ./scripts/mcpb --version 1.2.3 --os darwin --out DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/icon"
	"github.com/runbox-mcp/runbox/manifest"
)

// platforms maps Go's OS names to the bundle's.
var platforms = map[string]string{"darwin": "darwin", "windows": "win32", "linux": "linux"}

type bundle struct {
	ManifestVersion string   `json:"manifest_version"`
	Name            string   `json:"name"`
	DisplayName     string   `json:"display_name"`
	Version         string   `json:"version"`
	Description     string   `json:"description"`
	LongDescription string   `json:"long_description"`
	Author          author   `json:"author"`
	Repository      repo     `json:"repository"`
	Homepage        string   `json:"homepage"`
	Documentation   string   `json:"documentation"`
	Icon            string   `json:"icon"`
	Server          server   `json:"server"`
	Tools           []tool   `json:"tools"`
	ToolsGenerated  bool     `json:"tools_generated"`
	Keywords        []string `json:"keywords"`
	Compatibility   compat   `json:"compatibility"`
}

type author struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

type repo struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

type server struct {
	Type       string    `json:"type"`
	EntryPoint string    `json:"entry_point"`
	MCPConfig  mcpConfig `json:"mcp_config"`
}

type mcpConfig struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

type tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

type compat struct {
	Platforms []string `json:"platforms"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpb:", err)
		os.Exit(1)
	}
}

func run() error {
	version := flag.String("version", "", "the release's version (semver, no v)")
	goos := flag.String("os", "", "darwin, windows or linux")
	out := flag.String("out", "", "the bundle's folder (its binaries already there)")
	flag.Parse()
	platform, ok := platforms[*goos]
	if *version == "" || !ok || *out == "" {
		return fmt.Errorf("usage: mcpb --version V --os darwin|windows|linux --out DIR")
	}
	bin := "runbox"
	if *goos == "windows" {
		bin = "runbox.exe"
	}
	b := bundle{
		ManifestVersion: "0.3",
		Name:            "runbox",
		DisplayName:     "runbox: run code in a sandbox",
		Version:         strings.TrimPrefix(*version, "v"),
		Description:     "Run the Python, JavaScript, TypeScript and bash your agent writes in a hardened, ephemeral container, with a structured result.",
		LongDescription: "runbox runs each call in a fresh, hardened container with no network (Docker Desktop, OrbStack, Colima, Rancher Desktop or Podman must be running) and answers with stdout and stderr, the exit code, the files written (images inline) and a typed error with a hint. After installing, run `runbox setup` once to make the sandbox image, and `runbox doctor` to check everything.",
		Author:          author{Name: "runbox", URL: "https://github.com/runbox-mcp"},
		Repository:      repo{Type: "git", URL: "https://github.com/runbox-mcp/runbox"},
		Homepage:        "https://github.com/runbox-mcp/runbox",
		Documentation:   "https://github.com/runbox-mcp/runbox#readme",
		Icon:            "icon.png",
		Server: server{Type: "binary", EntryPoint: bin,
			MCPConfig: mcpConfig{Command: "${__dirname}/" + bin, Args: []string{"serve"}}},
		Keywords:       []string{"code execution", "sandbox", "python", "javascript", "typescript", "bash", "containers"},
		ToolsGenerated: true,
		Compatibility:  compat{Platforms: []string{platform}},
	}
	// run_code with its title and description as the server registers
	// it, and the session and run handle tools by name (their
	// descriptions depend on the running server's sessions); the server
	// tells the rest at run time (saved tools, search_tools). Read from
	// contract: the bundle's script imports no MCP code.
	rc := contract.ToolDescription(manifest.Default())
	b.Tools = []tool{
		{Name: contract.ToolRunCode, Description: contract.RunCodeTitle + ": " + strings.SplitN(rc, "\n", 2)[0]},
		{Name: contract.ToolSessionOpen, Description: "Open a session whose interpreter keeps its state between run_code calls."},
		{Name: contract.ToolSessionClose, Description: "Close a session and remove its sandbox."},
		{Name: contract.ToolSessionList, Description: "List your open sessions."},
		{Name: contract.ToolRunWait, Description: "Wait for a run that run_code answered with status running, and get its result."},
		{Name: contract.ToolRunCancel, Description: "Stop a run that run_code answered with status running."},
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "manifest.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "icon.png"), icon.PNG(512), 0o644)
}
