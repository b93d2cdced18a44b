//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/runbox-mcp/runbox/contract"
)

// debianStandIn is the local stand-in for the registry's Debian bookworm
// image (scripts/debian-base.sh): no registry is reachable here.
const debianStandIn = "runbox-test/debian:bookworm"

// runboxCmd runs the built binary and returns its combined output.
func runboxCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(runboxBin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func dockerOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func imagePresent(ref string) bool {
	return exec.Command("docker", "image", "inspect", ref).Run() == nil
}

// `runbox setup` makes the sandbox image by both of its build paths from
// this checkout's binary, with no make: inside the engine (from a Debian
// base; the registry's is stood in for by a local debootstrap) and on the
// host (images/build.sh). Both images hold the same packages at the same
// versions, owned alike, carry the same recipe, and run code under the
// whole hardening self-test. Heavy (two Debian bootstraps, a few minutes
// each): the images get their own tags, so runbox/sandbox:bookworm, which
// other tests use, is never replaced, and they are removed at the end.
//
// It runs beside other tests: its images, tags and build stages are its
// own (no other test builds by setup's engine method or uses the Debian
// stand-in).
func TestSetupBuildPaths(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"debootstrap", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no %s: run `make setup`", tool)
			}
			t.Skipf("no %s here (`make setup` installs it)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the host build and the Debian stand-in need root")
	}
	repo, _ := filepath.Abs("..")
	suffix := fmt.Sprintf("e2e-%d", os.Getpid())
	engineTag := "runbox-test/sandbox-engine:" + suffix
	hostTag := "runbox-test/sandbox-host:" + suffix
	hadBase := imagePresent(debianStandIn)
	t.Cleanup(func() {
		for _, ref := range []string{engineTag, hostTag} {
			_ = exec.Command("docker", "rmi", ref).Run()
		}
		if !hadBase {
			_ = exec.Command("docker", "rmi", debianStandIn).Run()
		}
	})
	if out, err := exec.Command("bash", filepath.Join(repo, "scripts", "debian-base.sh"), debianStandIn).CombinedOutput(); err != nil {
		t.Fatalf("debian-base.sh: %v\n%s", err, out)
	}

	// A build killed before this test (a run stopped mid-build) may have
	// left its first stage: only what this build leaves counts.
	stagesBefore := strings.Fields(dockerOut(t, "images", "-q", "--filter", "label=io.runbox.setup-build"))
	start := time.Now()
	out, err := runboxCmd(t, t.TempDir(), "setup", "--method", "engine", "--base", debianStandIn, "--image", engineTag)
	if err != nil {
		t.Fatalf("setup --method engine: %v\n%s", err, out)
	}
	t.Logf("engine-side build: %s", time.Since(start).Round(time.Second))
	if !strings.Contains(out, "ready by engine build") {
		t.Fatalf("setup does not say how the image was made:\n%s", out)
	}
	// The build's first stage (the debootstrapped tree, ~1 GB) is gone.
	for _, id := range strings.Fields(dockerOut(t, "images", "-q", "--filter", "label=io.runbox.setup-build")) {
		if !slices.Contains(stagesBefore, id) {
			t.Errorf("intermediate image left: %s", id)
		}
	}

	// Idempotent and fast when current: no pull, no build.
	start = time.Now()
	out, err = runboxCmd(t, t.TempDir(), "setup", "--image", engineTag)
	if err != nil || !strings.Contains(out, "is up to date") || time.Since(start) > 10*time.Second {
		t.Fatalf("second setup (%s): %v\n%s", time.Since(start), err, out)
	}

	start = time.Now()
	out, err = runboxCmd(t, repo, "setup", "--method", "host", "--image", hostTag)
	if err != nil {
		t.Fatalf("setup --method host: %v\n%s", err, out)
	}
	t.Logf("host build: %s", time.Since(start).Round(time.Second))

	label := `{{ index .Config.Labels "io.runbox.recipe" }} {{ index .Config.Labels "io.runbox.image" }} {{ .Config.WorkingDir }}`
	if e, h := dockerOut(t, "image", "inspect", "-f", label, engineTag), dockerOut(t, "image", "inspect", "-f", label, hostTag); e != h {
		t.Errorf("labels differ: engine %q, host %q", e, h)
	}
	// Package by package, then the files not owned by root.
	for _, q := range [][]string{
		{"dpkg-query", "-W", "-f", "${Package} ${Version} ${Architecture}\n"},
		{"find", "/", "-xdev", "(", "!", "-uid", "0", "-o", "!", "-gid", "0", ")", "-printf", "%p %u:%g %m\n"},
	} {
		e := sortedLines(dockerOut(t, append([]string{"run", "--rm", "--network", "none", engineTag}, q...)...))
		h := sortedLines(dockerOut(t, append([]string{"run", "--rm", "--network", "none", hostTag}, q...)...))
		if len(e) < 5 {
			t.Fatalf("%s: only %d lines", q[0], len(e))
		}
		if d := lineDiff(e, h); d != "" {
			t.Errorf("%s differs between the engine-built and the host-built image:\n%s", q[0], d)
		} else {
			t.Logf("%s: %d lines, identical", q[0], len(e))
		}
	}

	// The engine-built image passes the doctor's hardening self-test at
	// every isolation level and runs the curated libraries.
	m := writeManifest(t, strings.ReplaceAll(`languages:
  - name: python
    image: IMAGE
    file: main.py
    command: [python3, "{file}"]
    error_format: python
    env: {PYTHONUNBUFFERED: "1", PYTHONDONTWRITEBYTECODE: "1", MPLBACKEND: Agg}
  - name: javascript
    image: IMAGE
    file: main.js
    command: [node, "{file}"]
    error_format: node
  - name: bash
    image: IMAGE
    file: main.sh
    command: [bash, "{file}"]
    check: [bash, -n, "{file}"]
    error_format: bash
`, "IMAGE", engineTag))
	rep, code, raw := doctor(t, nil, "--manifest", m)
	if code != 0 || !rep.OK {
		t.Fatalf("doctor on the engine-built image: exit %d\n%s", code, raw)
	}
	code2 := t.TempDir() + "/plot.py"
	if err := os.WriteFile(code2, []byte("import numpy, scipy, pandas, matplotlib.pyplot as plt\nplt.plot(numpy.arange(3)); plt.savefig('p.png')\nprint(numpy.__version__)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(runboxBin, "run", "--manifest", m, "--json", code2)
	cmd.Dir = t.TempDir()
	stdout, err := cmd.Output()
	var res contract.Result
	if jerr := json.Unmarshal(stdout, &res); err != nil || jerr != nil || res.Status != contract.StatusOK || len(res.Artifacts) != 1 {
		t.Fatalf("run on the engine-built image: %v %v\n%s", err, jerr, stdout)
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return lines
}

// lineDiff lists the lines only in a (-) or only in b (+).
func lineDiff(a, b []string) string {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var d []string
	for _, x := range a {
		if !mb[x] {
			d = append(d, "- "+x)
		}
	}
	for _, x := range b {
		if !ma[x] {
			d = append(d, "+ "+x)
		}
	}
	return strings.Join(d, "\n")
}

// `runbox config claude-desktop --write` merges runbox into a Claude
// Desktop file that already has other servers; the server started from
// the file's command and args, as Claude Desktop starts it (no shell, an
// MCP client over stdio), runs code.
func TestConfigClaudeDesktopStartsServer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "Application Support", "Claude", "claude_desktop_config.json")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	const before = `{"mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}, "globalShortcut": ""}`
	if err := os.WriteFile(file, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runboxCmd(t, dir, "config", "claude-desktop", "--write", "--file", file)
	if err != nil {
		t.Fatalf("config --write: %v\n%s", err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
		GlobalShortcut *string `json:"globalShortcut"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if _, ok := cfg.MCPServers["filesystem"]; !ok || cfg.GlobalShortcut == nil {
		t.Fatalf("the other server or setting is gone:\n%s", b)
	}
	entry, ok := cfg.MCPServers["runbox"]
	if !ok || !filepath.IsAbs(entry.Command) {
		t.Fatalf("no runbox entry with an absolute command:\n%s", b)
	}

	// As a desktop app starts it: the file's command, args and env only.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	for k, v := range entry.Env {
		env = append(env, k+"="+v)
	}
	c, err := client.NewStdioMCPClient(entry.Command, env, entry.Args...)
	if err != nil {
		t.Fatalf("starting %s %v: %v", entry.Command, entry.Args, err)
	}
	defer c.Close()
	if err := initialize(c); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.CallTool(ctx, newCall(map[string]any{"language": "python", "code": "print(6 * 7)"}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != contract.StatusOK || r.Stdout != "42\n" {
		t.Fatalf("run_code through the configured server: %+v", r)
	}
}
