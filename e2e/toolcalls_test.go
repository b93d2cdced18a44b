//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// npmBin is where `make e2e` (npm ci in e2e/ts) puts the reference MCP
// servers the tool-call tests run.
func npmBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("ts", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run `cd e2e/ts && npm ci` (make e2e does)", name)
	}
	return p
}

// toolServers is a manifest with the three reference servers over stdio:
// everything, memory (its file named through a host variable, which must
// never reach a box) and filesystem on dir.
func toolServers(t *testing.T, dir string) string {
	t.Helper()
	t.Setenv("RUNBOX_TEST_MEMORY_FILE", filepath.Join(dir, "memory.jsonl"))
	return "servers:\n" +
		"  - name: everything\n    command: " + npmBin(t, "mcp-server-everything") + "\n" +
		"  - name: memory\n    command: " + npmBin(t, "mcp-server-memory") + "\n    env:\n      MEMORY_FILE_PATH: RUNBOX_TEST_MEMORY_FILE\n" +
		"  - name: fs\n    command: " + npmBin(t, "mcp-server-filesystem") + "\n    args: [" + dir + "]\n"
}

// TestToolCallsChain: a Python and a JavaScript program each chain calls
// to three real servers and print only a summary.
func TestToolCallsChain(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	s := dockerServer(t, toolServers(t, dir))

	t.Run("python", func(t *testing.T) {
		code := `import json, os
import runbox_tools as tools
total = tools.everything.get_sum(a=2, b=40)
tools.memory.create_entities(entities=[{"name": "runbox", "entityType": "project", "observations": ["sum: %s" % total]}])
graph = tools.memory.read_graph()
names = [e["name"] for e in (graph["entities"] if isinstance(graph, dict) else json.loads(graph)["entities"])]
tools.fs.write_file(path="` + dir + `/py.txt", content="entities: %s" % names)
text = tools.call("fs", "read_text_file", {"path": "` + dir + `/py.txt"})
img = tools.everything.get_tiny_image()
img = [p for p in img if isinstance(p, bytes)][0] if isinstance(img, list) else img
doc = tools.everything.get_sum.__doc__
print("sum has 42:", "42" in str(total), "| file:", text if isinstance(text, str) else text["content"], "| image bytes:", img[:4] == b"\x89PNG", "| doc:", "Returns the sum" in doc and "a:" in doc, "| env:", "RUNBOX_TEST_MEMORY_FILE" in os.environ)
`
		r := runTools(t, s, "python", code)
		want := "sum has 42: True | file: entities: ['runbox'] | image bytes: True | doc: True | env: False\n"
		if r.Stdout != want {
			t.Fatalf("stdout %q, want %q (stderr %s, error %+v)", r.Stdout, want, r.Stderr, r.Error)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "py.txt")); err != nil || string(b) != "entities: ['runbox']" {
			t.Fatalf("the file on the host: %q %v", b, err)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		code := `const tools = require('runbox_tools');
(async () => {
  const total = await tools.everything.get_sum({a: 1, b: 2});
  await tools.memory.create_entities({entities: [{name: 'js', entityType: 'lang', observations: [String(total)]}]});
  const found = await tools.memory.search_nodes({query: 'js'});
  const entities = typeof found === 'string' ? JSON.parse(found).entities : found.entities;
  await tools.fs.write_file({path: '` + dir + `/js.txt', content: 'found ' + entities.length});
  const listing = await tools.call('fs', 'list_directory', {path: '` + dir + `'});
  let denied = '';
  try { await tools.everything.no_such_tool({}); } catch (e) { denied = e.name + ':' + e.kind + ':' + e.server + '.' + e.tool; }
  console.log('sum3', String(JSON.stringify(total)).includes('3'), 'listing', JSON.stringify(listing).includes('js.txt'), denied);
})().catch((e) => { console.error(e); process.exit(1); });
`
		r := runTools(t, s, "javascript", code)
		want := "sum3 true listing true ToolError:unknown_tool:everything.no_such_tool\n"
		if r.Stdout != want {
			t.Fatalf("stdout %q, want %q (stderr %s, error %+v)", r.Stdout, want, r.Stderr, r.Error)
		}
	})

	t.Run("javascript, imported as an ES module", func(t *testing.T) {
		r := runTools(t, s, "javascript", "(async () => {\n  const { default: tools, call } = await import('runbox_tools');\n  console.log(await tools.everything.echo({message: 'esm'}), await call('everything', 'get-sum', {a: 1, b: 1}));\n})();\n")
		if !strings.HasPrefix(r.Stdout, "Echo: esm ") || !strings.Contains(r.Stdout, "2") {
			t.Fatalf("stdout %q stderr %s", r.Stdout, r.Stderr)
		}
	})

	t.Run("discovery: run_code names servers and tool counts, search_tools the rest", func(t *testing.T) {
		desc := s.described(t, "everything (", "memory (9 tools)", "fs (")
		list, err := s.c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, tl := range list.Tools {
			names = append(names, tl.Name)
		}
		// The default server's tools (sessions with their checkpoints) and
		// search_tools; no tool per upstream tool.
		slices.Sort(names)
		if strings.Join(names, ",") != "run_cancel,run_code,run_wait,search_tools,session_checkpoint,session_close,session_fork,session_list,session_open,session_restore" {
			t.Fatalf("tools %v", names)
		}
		for _, want := range []string{"everything (", " tools)", "memory (9 tools)", "fs (", "import runbox_tools"} {
			if !strings.Contains(desc, want) {
				t.Errorf("run_code's description lacks %q:\n%s", want, desc)
			}
		}
		if strings.Contains(desc, "get-sum") || strings.Contains(desc, "create_entities") {
			t.Errorf("run_code's description names tools:\n%s", desc)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "search_tools", map[string]any{"query": "sum"}
		res, err := s.c.CallTool(context.Background(), req)
		if err != nil || res.IsError {
			t.Fatalf("search_tools: %v %+v", err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		if !strings.Contains(string(b), `"call":"tools.everything.get_sum"`) || strings.Contains(string(b), "input_schema") {
			t.Fatalf("search_tools: %s", b)
		}
		req.Params.Arguments = map[string]any{"query": "get-sum", "schemas": true}
		res, _ = s.c.CallTool(context.Background(), req)
		if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"input_schema"`) {
			t.Fatalf("search_tools with schemas: %s", b)
		}
	})

	t.Run("help() shows the stubs' descriptions and typed signatures", func(t *testing.T) {
		r := runTools(t, s, "python", "import pydoc\nimport runbox_tools as tools\nprint(pydoc.render_doc(tools.everything.get_sum, renderer=pydoc.plaintext))\nprint(pydoc.render_doc(tools.everything, renderer=pydoc.plaintext)[:8000])\n")
		for _, want := range []string{"get_sum(*, a: float, b: float)", "Returns the sum of two numbers", "a: float - First number", "get_tiny_image", "Tools of MCP server 'everything'"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("help lacks %q:\n%s\n%s", want, r.Stdout, r.Stderr)
			}
		}
	})

	t.Run("a tool's error and an unknown server raise typed errors", func(t *testing.T) {
		code := `import runbox_tools as tools
try:
    tools.fs.read_text_file(path="/etc/passwd")
except tools.ToolError as e:
    print(e.kind, e.server, e.tool)
try:
    tools.nosuch.thing()
except tools.ToolError as e:
    print(e.kind, e.server, isinstance(e, AttributeError))
`
		r := runTools(t, s, "python", code)
		if r.Stdout != "tool_error fs read_text_file\nunknown_server nosuch True\n" {
			t.Fatalf("stdout %q stderr %s", r.Stdout, r.Stderr)
		}
	})
}

// run2 runs code on s and returns the result.
func runTools(t *testing.T, s *server, lang, code string) contract.Result {
	t.Helper()
	start := time.Now()
	r, _ := s.call(t, map[string]any{"language": lang, "code": code, "timeout_seconds": 60})
	t.Logf("%s took %s", lang, time.Since(start).Round(time.Millisecond))
	return r
}

// TestToolCallsGVisor: under gVisor the calls take the same channel.
func TestToolCallsGVisor(t *testing.T) {
	dir := t.TempDir()
	s := gvisorServer(t, toolServers(t, dir))
	r := runTools(t, s, "python", `import runbox_tools as tools
n = tools.everything.get_sum(a=20, b=22)
tools.memory.create_entities(entities=[{"name": "gv", "entityType": "x", "observations": [str(n)]}])
print("42" in str(n), len(tools.fs.list_allowed_directories()) > 0)
`)
	if r.Stdout != "True True\n" || r.Isolation != "gvisor" {
		t.Fatalf("stdout %q isolation %q stderr %s error %+v", r.Stdout, r.Isolation, r.Stderr, r.Error)
	}
}

// TestToolCallsPooled: a pooled box's interpreter, started before its
// job, finds the library too.
func TestToolCallsPooled(t *testing.T) {
	s := dockerServer(t, toolServers(t, t.TempDir())+"pool:\n  size: 1\n")
	var r contract.Result
	// Paced as an agent calls: the pool fills only while no call has come
	// for 200 ms (refills yield to running calls).
	waitFor(t, 60*time.Second, func() bool {
		time.Sleep(500 * time.Millisecond)
		r = runTools(t, s, "python", "import runbox_tools as tools\nprint(tools.everything.echo(message='pooled'))\n")
		return r.Metrics.Pooled
	})
	if r.Stdout != "Echo: pooled\n" {
		t.Fatalf("stdout %q stderr %s error %+v", r.Stdout, r.Stderr, r.Error)
	}
}

// TestToolCallsReadme runs the README's program against its manifest's
// memory server (the reference server from npm, without npx).
func TestToolCallsReadme(t *testing.T) {
	sn := readmeSnippets(t)
	manifest, program := sn["tools-manifest"], sn["tools-program"]
	if !strings.Contains(manifest, "@modelcontextprotocol/server-memory") || program == "" {
		t.Fatalf("README snippets:\n%s\n%s", manifest, program)
	}
	// The README's memory server, as installed by e2e/ts (npx would fetch it).
	dir := t.TempDir()
	t.Setenv("RUNBOX_MEMORY_FILE", filepath.Join(dir, "memory.jsonl"))
	memory := strings.Replace(manifest[:strings.Index(manifest, "  - name: files")], "command: npx", "command: "+npmBin(t, "mcp-server-memory"), 1)
	memory = strings.Replace(memory, `args: ["-y", "@modelcontextprotocol/server-memory"]`, "args: []", 1)
	s := dockerServer(t, memory)
	r := runTools(t, s, "python", program)
	if r.Stdout != "2 entities, 1 relation\n" {
		t.Fatalf("stdout %q stderr %s error %+v", r.Stdout, r.Stderr, r.Error)
	}
}

// TestKubeToolCalls: on Kubernetes the calls take the pod's attach stream,
// the same channel; the pod has no network.
func TestKubeToolCalls(t *testing.T) {
	s := kubeServer(t, toolServers(t, t.TempDir()))
	r := runTools(t, s, "python", `import runbox_tools as tools
n = tools.everything.get_sum(a=20, b=22)
tools.memory.create_entities(entities=[{"name": "k8s", "entityType": "x", "observations": [str(n)]}])
print("42" in str(n), [e["name"] for e in tools.memory.read_graph()["entities"]])
`)
	if r.Stdout != "True ['k8s']\n" {
		t.Fatalf("stdout %q stderr %s error %+v", r.Stdout, r.Stderr, r.Error)
	}
}

// TestToolCallsAudit: each call is in its run's audit line, its arguments'
// head redacted.
func TestToolCallsAudit(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.jsonl")
	s := startServer(t, secretEnv, "--manifest", writeManifest(t, "audit:\n  enabled: true\n  path: "+log+"\nservers:\n  - name: everything\n    command: "+npmBin(t, "mcp-server-everything")+"\n"))
	t.Cleanup(s.close)
	r := runTools(t, s, "python", "import runbox_tools as tools\ntools.everything.echo(message='token "+fakeSecret+"')\ntry:\n    tools.call('everything', 'nope', {})\nexcept tools.ToolError:\n    pass\n")
	mustOK(t, r)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Redacted  int
		ToolCalls []struct {
			Server, Tool, Outcome string
			ArgsHead              string `json:"args_head"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if strings.Contains(string(b), fakeSecret) || len(e.ToolCalls) != 2 || e.ToolCalls[0].Tool != "echo" || e.ToolCalls[0].Outcome != "ok" ||
		!strings.Contains(e.ToolCalls[0].ArgsHead, "token") || e.ToolCalls[1].Outcome != "unknown_tool" || e.Redacted == 0 {
		t.Fatalf("audit line %s", b)
	}
}

// TestToolCallsTyped: the typed bindings against the real
// server-everything. The Python stubs show typed signatures and refuse
// a wrong keyword, a missing argument or a wrong type before the call
// leaves the box (the audit records only the calls that went out); the
// typings op answers TypeScript declarations of the tools; search_tools
// writes signatures in the language asked for.
func TestToolCallsTyped(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.jsonl")
	s := startServer(t, secretEnv, "--manifest", writeManifest(t, "audit:\n  enabled: true\n  path: "+log+"\nservers:\n  - name: everything\n    command: "+npmBin(t, "mcp-server-everything")+"\n"))
	t.Cleanup(s.close)

	t.Run("python stubs check arguments in the box", func(t *testing.T) {
		code := `import inspect
import runbox_tools as tools
print(inspect.signature(tools.everything.get_sum))
print(inspect.signature(tools.everything.get_annotated_message))
help(tools.everything.echo)
for kwargs in ({"a": 1, "c": 2}, {"a": 1, "b": "2"}, {"a": 1}):
    try:
        tools.everything.get_sum(**kwargs)
        print("sent", kwargs)
    except tools.ToolError as e:
        print("refused", e.kind, e.server, e.tool, e.message)
try:
    tools.everything.get_annotated_message(messageType="warning")
except tools.ToolError as e:
    print("refused", e.kind, e.message)
print("sum", tools.everything.get_sum(a=2, b=40))
`
		r := runTools(t, s, "python", code)
		mustOK(t, r)
		for _, want := range []string{
			"(*, a: float, b: float) -> Any\n",
			"(*, messageType: Literal['error', 'success', 'debug'], includeImage: bool = None) -> Any\n",
			"echo(*, message: str) -> Any", "message: str - Message to echo",
			"refused bad_request everything get-sum unknown argument 'c' (the tool takes: a, b)\n",
			"refused bad_request everything get-sum argument b must be a number, not str\n",
			"refused bad_request everything get-sum missing required argument b\n",
			`refused bad_request argument messageType must be one of "error", "success", "debug", not str` + "\n",
			"sum The sum of 2 and 40 is 42.",
		} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("stdout lacks %q:\n%s\n%s", want, r.Stdout, r.Stderr)
			}
		}
		if strings.Contains(r.Stdout, "\nsent ") {
			t.Errorf("a wrong call went out:\n%s", r.Stdout)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			ToolCalls []struct{ Server, Tool, Outcome string } `json:"tool_calls"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		// Only the good call reached the host: the refused ones never left
		// the box.
		if len(e.ToolCalls) != 1 || e.ToolCalls[0].Tool != "get-sum" || e.ToolCalls[0].Outcome != "ok" {
			t.Fatalf("audit line %s", b)
		}
	})

	t.Run("the typings op answers the declarations", func(t *testing.T) {
		// The request a type checker in the box sends, as is.
		code := `import json, socket
s = socket.socket(socket.AF_UNIX)
s.connect("/tmp/.runbox/tools.sock")
s.sendall(json.dumps({"op": "typings", "language": "typescript"}).encode())
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(1 << 16)
    if not b:
        break
    data += b
a = json.loads(data)
print(a["ok"], len(a["text"]) > 0)
print(a["text"])
`
		r := runTools(t, s, "python", code)
		mustOK(t, r)
		for _, want := range []string{
			"True True\n", `declare module "runbox_tools" {`, "export namespace everything {",
			"export function echo(args: EchoArgs): Promise<unknown>;", "message: string;",
			"export function get_sum(args: GetSumArgs): Promise<unknown>;", "a: number;", "b: number;",
			"export function get_structured_content(args: GetStructuredContentArgs): Promise<GetStructuredContentResult>;",
			`location: "New York" | "Chicago" | "Los Angeles";`, "export class ToolError extends Error {",
		} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("the declarations lack %q:\n%s\n%s", want, r.Stdout, r.Stderr)
			}
		}
		if d := strings.Index(r.Stdout, "// runbox_tools:"); d >= 0 {
			typeCheck(t, r.Stdout[d:])
		}
		r = runTools(t, s, "javascript", "const tools = require('runbox_tools');\n(async () => {\n  const d = await tools.typings();\n  console.log(d.includes('export function echo(args: EchoArgs)'));\n  try { await tools.typings('cobol'); } catch (e) { console.log(e.name, e.kind); }\n})();\n")
		if r.Stdout != "true\nToolError bad_request\n" {
			t.Fatalf("typings() in JavaScript: %q %s", r.Stdout, r.Stderr)
		}
	})

	t.Run("search_tools writes signatures in the language asked for", func(t *testing.T) {
		for lang, want := range map[string]string{
			"":           "tools.everything.get_sum(*, a: float, b: float) -> Any",
			"python":     "tools.everything.echo(*, message: str) -> Any",
			"typescript": "tools.everything.echo(args: { message: string }): Promise<unknown>",
		} {
			req := mcp.CallToolRequest{}
			args := map[string]any{"query": "sum"}
			if lang != "" {
				args = map[string]any{"query": "echo", "language": lang}
			}
			req.Params.Name, req.Params.Arguments = "search_tools", args
			res, err := s.c.CallTool(context.Background(), req)
			if err != nil || res.IsError {
				t.Fatalf("search_tools %s: %v %+v", lang, err, res)
			}
			b, _ := json.Marshal(res.StructuredContent)
			if w, _ := json.Marshal(want); !strings.Contains(string(b), `"signature":`+string(w)) {
				t.Errorf("search_tools %q lacks %s: %s", lang, want, b)
			}
		}
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "search_tools", map[string]any{"language": "cobol"}
		if res, err := s.c.CallTool(context.Background(), req); err != nil || !res.IsError {
			t.Fatalf("search_tools in cobol: %v %+v", err, res)
		}
	})
}

// typeCheck compiles the declarations the typings op answered, with a
// program that calls the real tools as they are typed, using the host's
// TypeScript (npx typescript@5.9.3, the version the image pins); it skips where npx is absent.
func typeCheck(t *testing.T, decl string) {
	t.Helper()
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Log("no npx on this machine: the declarations are not compiled")
		return
	}
	dir := t.TempDir()
	files := map[string]string{
		"runbox_tools.d.ts": decl,
		"main.ts": "import tools, { everything } from \"runbox_tools\";\n" +
			"async function main(): Promise<void> {\n  await everything.echo({ message: \"hi\" });\n  await tools.everything.get_sum({ a: 1, b: 2 });\n" +
			"  const w = await everything.get_structured_content({ location: \"Chicago\" });\n  const n: number = w.temperature;\n  console.log(n);\n}\nmain();\n",
		"tsconfig.json": `{"compilerOptions":{"strict":true,"noEmit":true,"target":"es2022","module":"nodenext","moduleResolution":"nodenext","types":[]},"files":["runbox_tools.d.ts","main.ts"]}`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(npx, "-y", "-p", "typescript@5.9.3", "tsc", "-p", dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc on the typings op's declarations: %v\n%s", err, out)
	}
}
