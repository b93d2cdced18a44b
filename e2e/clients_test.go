//go:build e2e

package e2e

// TestClients: the agent CLIs people use (e2e/clients, pinned), each with
// runbox as its stdio MCP server and a scripted model on 127.0.0.1
// (clients_model_test.go), and what each handed its model as runbox's tool
// result checked for the facts the model needs (clients_facts_test.go).
//
// By default every scenario runs on Claude Code and the first scenario on
// each other client; RUNBOX_CLIENTS=all (make clients) runs the whole
// matrix. Each line "measured:" is what a client's model received.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clientTimeout bounds one client run (a conversation of a few calls on a
// loaded machine).
const clientTimeout = 4 * time.Minute

// mcpServer is runbox as a client's config names it.
type mcpServer struct {
	Command string
	Args    []string
	Env     map[string]string
}

// clientRun is one client run's isolated world: its HOME, working
// directory and config files all under dir.
type clientRun struct {
	dir, home, work string
	model           string // the scripted model's base URL
	proxy           string // the network guard's URL
	runbox          mcpServer
}

// agentClient is a CLI and how to point it at the scripted model and at
// runbox, with tools pre-approved and all other traffic off.
type agentClient struct {
	name string
	bin  string // in e2e/clients/node_modules/.bin
	// setup writes the run's config files and returns the arguments and
	// environment of a non-interactive run with prompt.
	setup func(t *testing.T, r clientRun, prompt string) (args, env []string)
	// refused is hosts the client tries at every start with no setting to
	// stop it; the guard refuses them and the test only logs them.
	refused []string
}

// baseEnv is the environment every client run starts from: nothing of the
// developer's own, HOME and the XDG dirs inside the run.
func baseEnv(r clientRun) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.home,
		"USER=runbox-e2e",
		"TMPDIR=" + filepath.Join(r.dir, "tmp"),
		"XDG_CONFIG_HOME=" + filepath.Join(r.home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(r.home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(r.home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(r.home, ".local", "state"),
		"NO_COLOR=1",
		"TERM=dumb",
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"HTTP_PROXY=" + r.proxy, "http_proxy=" + r.proxy,
		"HTTPS_PROXY=" + r.proxy, "https_proxy=" + r.proxy,
		"ALL_PROXY=" + r.proxy, "all_proxy=" + r.proxy,
	}
}

func writeClientFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

var agentClients = []agentClient{
	{name: "claude-code", bin: "claude", setup: func(t *testing.T, r clientRun, prompt string) ([]string, []string) {
		cfg := filepath.Join(r.dir, "mcp.json")
		writeClientFile(t, cfg, mustJSON(map[string]any{"mcpServers": map[string]any{"runbox": map[string]any{
			"type": "stdio", "command": r.runbox.Command, "args": r.runbox.Args, "env": r.runbox.Env}}}))
		return []string{"-p", prompt, "--mcp-config", cfg, "--strict-mcp-config",
				"--allowedTools", "mcp__runbox", "--model", "sonnet", "--output-format", "text"},
			append(baseEnv(r),
				"CLAUDE_CONFIG_DIR="+filepath.Join(r.home, ".claude"),
				"ANTHROPIC_BASE_URL="+r.model,
				"ANTHROPIC_API_KEY=sk-ant-scripted-model",
				// No telemetry, error reports, auto-update or other
				// non-essential traffic.
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_AUTOUPDATER=1",
				"DISABLE_TELEMETRY=1",
				"DISABLE_ERROR_REPORTING=1",
				"DISABLE_BUG_COMMAND=1",
				// MCP tools offered up front, not deferred behind ToolSearch
				// (the model would first search for run_code).
				"ENABLE_TOOL_SEARCH=false",
			)
	}},
	{name: "codex", bin: "codex", setup: func(t *testing.T, r clientRun, prompt string) ([]string, []string) {
		home := filepath.Join(r.home, ".codex")
		var env []string
		for k, v := range r.runbox.Env {
			env = append(env, fmt.Sprintf("%s = %q", k, v))
		}
		args, _ := json.Marshal(r.runbox.Args)
		writeClientFile(t, filepath.Join(home, "config.toml"), fmt.Sprintf(`model = "scripted-model"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.scripted]
name = "scripted"
base_url = "%s/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

# Plugins and apps sync catalogs from github.com and chatgpt.com at start.
[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
tool_suggest = false

[mcp_servers.runbox]
command = %q
args = %s
env = { %s }
`, r.model, r.runbox.Command, args, strings.Join(env, ", ")))
		return []string{"exec", "--skip-git-repo-check", "--color", "never", prompt},
			append(baseEnv(r), "CODEX_HOME="+home, "SCRIPTED_API_KEY=scripted")
	}},
	{name: "gemini-cli", bin: "gemini", setup: func(t *testing.T, r clientRun, prompt string) ([]string, []string) {
		writeClientFile(t, filepath.Join(r.home, ".gemini", "settings.json"), mustJSON(map[string]any{
			"mcpServers": map[string]any{"runbox": map[string]any{
				"command": r.runbox.Command, "args": r.runbox.Args, "env": r.runbox.Env, "trust": true}},
			"general":   map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		}))
		return []string{"-p", prompt, "--approval-mode", "yolo", "-m", "gemini-2.5-flash"},
			append(baseEnv(r), "GEMINI_API_KEY=scripted-model", "GOOGLE_GEMINI_BASE_URL="+r.model,
				"GEMINI_CLI_NO_RELAUNCH=true",
				// The run's own working directory, trusted as a user would.
				"GEMINI_CLI_TRUST_WORKSPACE=true")
	}},
	{name: "opencode", bin: "opencode", setup: func(t *testing.T, r clientRun, prompt string) ([]string, []string) {
		cfg := filepath.Join(r.dir, "opencode.json")
		env := map[string]string{}
		for k, v := range r.runbox.Env {
			env[k] = v
		}
		writeClientFile(t, cfg, mustJSON(map[string]any{
			"$schema":    "https://opencode.ai/config.json",
			"model":      "anthropic/claude-sonnet-4-5",
			"autoupdate": false,
			"share":      "disabled",
			"permission": map[string]any{"*": "allow"},
			"provider": map[string]any{"anthropic": map[string]any{
				"options": map[string]any{"baseURL": r.model + "/v1", "apiKey": "sk-ant-scripted-model"}}},
			"mcp": map[string]any{"runbox": map[string]any{"type": "local", "enabled": true,
				"command": append([]string{r.runbox.Command}, r.runbox.Args...), "environment": env}},
		}))
		return []string{"run", prompt},
			append(baseEnv(r), "OPENCODE_CONFIG="+cfg,
				"OPENCODE_DISABLE_MODELS_FETCH=1",
				"OPENCODE_DISABLE_AUTOUPDATE=1",
				"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
				"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
				"OPENCODE_DISABLE_SHARE=1",
				"OPENCODE_DISABLE_CLAUDE_CODE=1",
				"OPENCODE_DISABLE_PROJECT_CONFIG=1",
			)
	},
		// opencode 1.18.33 installs @opencode-ai/plugin into its config
		// directory in the background at every start (Config.loadInstanceState);
		// no setting or variable turns it off, and a failure is only logged.
		refused: []string{"registry.npmjs.org:443"},
	},
}

// clientScenario is a conversation: the calls the model makes, and for
// each the facts its result must show the model.
type clientScenario struct {
	name string
	// servers is the manifest's servers section, if any.
	servers func(t *testing.T) string
	// coldCache starts runbox with an empty cache (no image probes).
	coldCache bool
	calls     []toolCall
	facts     [][]fact
}

func runCode(code string) toolCall {
	return toolCall{Tool: "run_code", Args: map[string]any{"language": "python", "code": code}}
}

// bigOutput is n lines of 100 characters between a head and a tail
// marker: the program that prints it and its exact stdout.
func bigOutput(n int, tag string) (code, stdout string) {
	code = fmt.Sprintf("print('HEAD-%[1]s')\nfor i in range(%[2]d):\n    print('%%05d ' %% i + 'x' * 93)\nprint('TAIL-%[1]s')\n", tag, n)
	var b strings.Builder
	fmt.Fprintf(&b, "HEAD-%s\n", tag)
	for i := range n {
		fmt.Fprintf(&b, "%05d %s\n", i, strings.Repeat("x", 93))
	}
	fmt.Fprintf(&b, "TAIL-%s\n", tag)
	return code, b.String()
}

func clientScenarios() []clientScenario {
	code60, out60 := bigOutput(600, "60K")
	code120, out120 := bigOutput(1200, "120K")
	codeErr, outErr := bigOutput(600, "ERR")
	// The raise is on line 6 of the submitted code (four lines print).
	codeErr += "def fail():\n    raise ValueError('TAIL-STDERR-MARKER')\nfail()\n"
	okRun := func(more ...fact) []fact { return append([]fact{factStatus("ok"), factExit(0)}, more...) }
	return []clientScenario{
		{name: "stdout, then a syntax error", calls: []toolCall{
			runCode("print('hello')\n"),
			runCode("x = 1\ny = 2\nprint(x +)\n"),
		}, facts: [][]fact{
			okRun(factText("stdout", "hello")),
			{factStatus("error"), factExit(1), factKind("syntax"), factLine(3), factHint},
		}},
		{name: "an image", calls: []toolCall{
			runCode("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.savefig('plot.png')\nprint('saved')\n"),
		}, facts: [][]fact{okRun(factText("artifact path", "plot.png"), factImages(1))}},
		{name: "a figure shown with plt.show()", calls: []toolCall{
			runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\nprint('shown')\n"),
		}, facts: [][]fact{okRun(factText("stdout", "shown"), factText("display", "image/png"), factImages(1))}},
		{name: "a DataFrame displayed", calls: []toolCall{
			runCode("import pandas as pd\ndf = pd.DataFrame({'n': range(1000), 'sq': [i * i for i in range(1000)]})\ndisplay(df)\n"),
		}, facts: [][]fact{okRun(factText("a row of the table", "| 19 | 361 |"), factText("its shape", "of 1000 rows x 2 columns)"))}},
		{name: "TypeScript, then a type error", calls: []toolCall{
			{Tool: "run_code", Args: map[string]any{"language": "typescript", "code": "const n: number = await Promise.resolve(41) + 1;\nconsole.log(`typed ${n}`);\n"}},
			{Tool: "run_code", Args: map[string]any{"language": "typescript", "code": "console.log('never');\nconst s: string = 1;\n"}},
		}, facts: [][]fact{
			okRun(factText("stdout", "typed 42")),
			{factStatus("error"), factKind("syntax"), factLine(2), factHint, factText("the compiler's code", "TS2322")},
		}},
		{name: "60,000 characters of stdout", calls: []toolCall{runCode(code60)},
			facts: [][]fact{okRun(factText("head", "HEAD-60K"), factText("tail", "TAIL-60K"), factStream("stdout", out60))}},
		{name: "120,000 characters of stdout", calls: []toolCall{runCode(code120)},
			facts: [][]fact{okRun(factText("head", "HEAD-120K"), factText("tail", "TAIL-120K"), factStream("stdout", out120))}},
		{name: "60,000 characters, then a traceback", calls: []toolCall{runCode(codeErr)},
			facts: [][]fact{{factStatus("error"), factExit(1), factKind("runtime"), factLine(6), factHint,
				factText("stdout head", "HEAD-ERR"), factText("stdout tail", "TAIL-ERR"), factStream("stdout", outErr),
				factText("stderr head", "Traceback (most recent call last)"), factText("stderr tail", "ValueError: TAIL-STDERR-MARKER")}}},
		{name: "a session over several calls", calls: []toolCall{
			{Tool: "session_open", Args: map[string]any{"language": "python"}},
			{Tool: "run_code", Args: map[string]any{"language": "python", "session_id": "$SESSION", "code": "x = 41\n"}},
			{Tool: "run_code", Args: map[string]any{"language": "python", "session_id": "$SESSION", "code": "print('state kept:', x + 1)\n"}},
		}, facts: [][]fact{
			// session_open's answer is no run: its id is the fact.
			{factText("session id", "s_")},
			okRun(factSession("alive")),
			okRun(factText("stdout", "state kept: 42"), factSession("alive")),
		}},
		// first_use: an upstream connected at startup delays initialize by
		// seconds, and Codex asks its model before runbox's tools are there
		// (docs/clients.md); the start is the cold-cache scenario's matter.
		{name: "a tool call from code that policy denies", servers: func(t *testing.T) string {
			return "servers:\n  - name: everything\n    command: " + npmBin(t, "mcp-server-everything") + "\n    connect: first_use\n    deny: [echo]\n"
		}, calls: []toolCall{
			runCode("import runbox_tools as tools\nprint('calling')\ntools.everything.echo(message='hi')\n"),
		}, facts: [][]fact{{factStatus("error"), factExit(1), factKind("runtime"), factLine(3), factHint, factText("the refusal", "denied")}}},
		{name: "a first start with an empty cache", coldCache: true, calls: []toolCall{runCode("print('cold start')\n")},
			facts: [][]fact{okRun(factText("stdout", "cold start"))}},
	}
}

func TestClients(t *testing.T) {
	all := os.Getenv("RUNBOX_CLIENTS") == "all"
	binDir, err := filepath.Abs(filepath.Join("clients", "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	// The image probes' cache all warm runs share, filled by a runbox
	// served once before them: only the cold-cache scenario starts cold.
	warmCache := t.TempDir()
	startServer(t, []string{"XDG_CACHE_HOME=" + warmCache}, "--manifest", writeManifest(t, "audit:\n  enabled: false\n")).close()
	for _, c := range agentClients {
		t.Run(c.name, func(t *testing.T) {
			bin := filepath.Join(binDir, c.bin)
			if _, err := os.Stat(bin); err != nil {
				absent(t, c.bin+" is not installed: run `make e2e/clients/node_modules` (cd e2e/clients && npm ci)")
			}
			for i, sc := range clientScenarios() {
				t.Run(sc.name, func(t *testing.T) {
					if i > 0 && c.name != "claude-code" && !all {
						t.Skip("RUNBOX_CLIENTS=all (make clients) runs every scenario on every client")
					}
					runClientScenario(t, c, bin, sc, warmCache)
				})
			}
		})
	}
}

func runClientScenario(t *testing.T, c agentClient, bin string, sc clientScenario, warmCache string) {
	dir := t.TempDir()
	r := clientRun{dir: dir, home: filepath.Join(dir, "home"), work: filepath.Join(dir, "work")}
	for _, d := range []string{r.home, r.work, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	manifest := "audit:\n  enabled: false\n"
	if sc.servers != nil {
		manifest += sc.servers(t)
	}
	mpath := filepath.Join(dir, "runbox.yaml")
	writeClientFile(t, mpath, manifest)
	cache := warmCache
	if sc.coldCache {
		cache = filepath.Join(dir, "runbox-cache")
	}
	r.runbox = mcpServer{Command: runboxBin, Args: []string{"serve", "--manifest", mpath}, Env: map[string]string{
		"XDG_CACHE_HOME": cache,
		"XDG_STATE_HOME": filepath.Join(dir, "runbox-state"),
		"HOME":           r.home,
		"PATH":           os.Getenv("PATH"),
		// runbox reaches only its engine; the guard is the clients'.
		"HTTP_PROXY": "", "http_proxy": "", "HTTPS_PROXY": "", "https_proxy": "", "ALL_PROXY": "", "all_proxy": "",
	}}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		r.runbox.Env["DOCKER_HOST"] = h
	}
	m := startModel(t, sc.calls)
	r.model = m.url()
	guard := startNetGuard(t)
	r.proxy = "http://" + guard.addr
	args, env := c.setup(t, r, "Use the runbox tools as the conversation asks.")

	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.Command(bin, args...)
	cmd.Dir = r.work
	cmd.Env = env
	cmd.Stdin = nil // /dev/null: nothing to read, nothing to block on
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps the output pipe open (runbox, an upstream) does
	// not hold Wait past the client's exit.
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: starting %s: %v", c.name, bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-ctx.Done():
		// The whole group: the client and the runbox it started. TERM
		// first, so runbox removes its boxes.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case runErr = <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			runErr = <-done
		}
		runErr = fmt.Errorf("killed after %v: %v", clientTimeout, runErr)
	}
	// A runbox the client left running is ended with its group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	t.Logf("%s ran in %v (%v); requests to the model: %v", c.name, time.Since(start).Round(time.Millisecond), runErr, m.requests)

	failed := false
	var beyond []string
	for _, h := range guard.tried() {
		if _, host, _ := strings.Cut(h, " "); slices.Contains(c.refused, host) {
			t.Logf("%s tried %s (known, refused)", c.name, h)
			continue
		}
		beyond = append(beyond, h)
	}
	if len(beyond) > 0 {
		t.Errorf("%s, %s: the client tried to reach the network beyond 127.0.0.1: %v", c.name, sc.name, beyond)
		failed = true
	}
	for k, call := range sc.calls {
		s, ok := m.result(k)
		if !ok {
			m.mu.Lock()
			offered, unknown, without := m.offered, m.unknown, m.without
			m.mu.Unlock()
			why := "the client never sent it back to the model"
			if unknown != "" {
				why = fmt.Sprintf("the client offered its model no runbox tool %q (tools offered: %v)", unknown, offered)
			} else if k == 0 && len(without) > 0 {
				why = fmt.Sprintf("the client asked its model without runbox's tools (tools offered: %v)", without)
			}
			t.Errorf("%s, %s: call %d (%s): no result reached the model: %s", c.name, sc.name, k+1, call.Tool, why)
			failed = true
			break
		}
		t.Logf("measured: %s | %s | call %d %s | %s", c.name, sc.name, k+1, call.Tool, measure(s))
		if missing := missingFacts(s, sc.facts[k]); len(missing) > 0 {
			t.Errorf("%s, %s: call %d (%s): the model could not read: %s\nwhat the model saw (%d chars, %d images):\n%s",
				c.name, sc.name, k+1, call.Tool, strings.Join(missing, "; "), len(s.Text()), s.Images, excerpt(s.Text()))
			failed = true
		}
	}
	if failed {
		t.Logf("%s output:\n%s", c.name, excerpt(out.String()))
	}
}

var summaryLine = regexp.MustCompile(`(?m)(^|\W)(ok|error) · (python|javascript) · `)

// measure says what a model received: how much, in which form, cut or
// not, images.
func measure(s seenResult) string {
	text := s.Text()
	ft := flat(text)
	var form []string
	if strings.Contains(ft, `"run_id"`) || strings.Contains(ft, `"status":`) {
		form = append(form, "structuredContent JSON")
	}
	if summaryLine.MatchString(ft) {
		form = append(form, "text summary")
	}
	if len(form) == 0 {
		form = append(form, "neither")
	}
	return fmt.Sprintf("%d chars in %d text part(s), %d image(s), form: %s", len(text), len(s.Texts), s.Images, strings.Join(form, " + "))
}

// excerpt is a long text's head and tail.
func excerpt(s string) string {
	const head, tail = 3000, 1500
	if len(s) <= head+tail {
		return s
	}
	return s[:head] + fmt.Sprintf("\n[… %d chars …]\n", len(s)-head-tail) + s[len(s)-tail:]
}
