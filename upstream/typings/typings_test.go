package typings

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// everything reads the tools server-everything lists (testdata, as its
// tools/list answered), as the bindings see them.
func everything(t *testing.T) []Server {
	t.Helper()
	b, err := os.ReadFile("testdata/everything_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var tools []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(b, &tools); err != nil {
		t.Fatal(err)
	}
	s := Server{Name: "everything", ID: "everything"}
	for _, tl := range tools {
		s.Tools = append(s.Tools, Tool{Name: tl.Name, ID: identifier(tl.Name), Description: tl.Description, Model: Parse(tl.InputSchema, tl.OutputSchema)})
	}
	return []Server{s}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (go test -update rewrites it after review):\n%s", name, got)
	}
}

func TestEverythingTypeScript(t *testing.T) {
	golden(t, "everything.d.ts", TypeScript(everything(t)))
}

func TestEverythingSignatures(t *testing.T) {
	var b strings.Builder
	for _, tl := range everything(t)[0].Tools {
		for _, lang := range []string{Python, TypeScriptLang} {
			b.WriteString(Signature(lang, "everything", tl.ID, tl.Model) + "\n")
		}
	}
	golden(t, "everything.signatures", b.String())
}

// hostile is a server whose schemas try to break the declarations: deep
// nesting, a huge enum, $ref cycles, names with quotes, "*/" and
// newlines, reserved words.
func hostile() []Server {
	deep := `{"type":"string"}`
	for range 200 {
		deep = `{"type":"object","properties":{"x":` + deep + `}}`
	}
	var enum []string
	for i := range 5000 {
		enum = append(enum, quote("v"+strings.Repeat("*/", i%3)+string(rune('a'+i%26))))
	}
	wide := `{"type":"object","properties":{`
	for i := range 3000 {
		if i > 0 {
			wide += ","
		}
		wide += quote("p"+string(rune('a'+i%26))+strings.Repeat("x", i/26)) + `:{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"number"}}]}`
	}
	wide += "}}"
	schemas := map[string]string{
		"deep":      deep,
		"huge-enum": `{"type":"object","properties":{"e":{"type":"string","enum":[` + strings.Join(enum, ",") + `]},"small":{"enum":["a\"b","*/ end",1,true,null]}},"required":["e"]}`,
		"cycle": `{"type":"object","properties":{"tree":{"$ref":"#/$defs/Node"},"odd":{"$ref":"#/definitions/A"}},"required":["tree"],` +
			`"$defs":{"Node":{"type":"object","description":"A node */ with children","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}},` +
			`"definitions":{"A":{"$ref":"#/definitions/B"},"B":{"anyOf":[{"$ref":"#/definitions/A"},{"type":"null"}]}}}`,
		"names": `{"type":"object","properties":{"a\"b":{"type":"string","description":"ends */ a comment\nline two\r\n*/"},"new\nline":{"type":"number"},"class":{"type":"boolean"},` +
			`"x*/y":{"type":["string","null"]},"free":{"type":"object","additionalProperties":{"type":"integer"}},"mixed":{"type":"object","properties":{"k":{"type":"string"}},"additionalProperties":true}},"additionalProperties":false}`,
		"wide":              wide,
		"junk":              `[1,2`,
		"not-obj":           `"string"`,
		"far-ref":           `{"type":"object","properties":{"r":{"$ref":"https://example.com/s.json"},"q":{"$ref":"#/$defs/missing"}}}`,
		"delete":            `{"type":"object"}`,
		"9lives":            `{"type":"object"}`,
		"weird \"*/\n name": `{"type":"object"}`,
	}
	s := Server{Name: "hostile */ \"srv\"\n", ID: "hostile"}
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		names = append(names, n)
	}
	sortStrings(names)
	for _, n := range names {
		s.Tools = append(s.Tools, Tool{Name: n, ID: identifier(n), Description: "Tool */ " + n + "\n*/ /* more", Model: Parse(json.RawMessage(schemas[n]), json.RawMessage(schemas[n]))})
	}
	return []Server{s, {Name: "call", ID: "call"}, {Name: "default", ID: "default"}, {Name: "empty", ID: "empty", Error: "gone */ away"}}
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func TestHostileSchemasStayBounded(t *testing.T) {
	servers := hostile()
	text := TypeScript(servers)
	if len(text) > 2<<20 {
		t.Fatalf("declarations of %d bytes", len(text))
	}
	// No comment ends early: outside string literals, every "*/" closes a
	// "/**" on the same line or a line that is only " */".
	for i, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		if strings.Contains(l, "*/") && !strings.HasPrefix(l, "/**") && l != "*/" && !strings.Contains(l, `"`) {
			t.Fatalf("line %d ends a comment early: %q", i+1, line)
		}
		if strings.HasPrefix(l, "//") && strings.Count(line, "\n") > 0 {
			t.Fatalf("line %d", i+1)
		}
	}
	for _, want := range []string{
		`export function cycle(args: CycleArgs)`, `tree: CycleNode;`, `children?: Array<CycleNode>;`, `odd?: CycleA;`,
		`"a\"b"?: string;`, `"new\nline"?: number;`, `class?: boolean;`, `"x*/y"?: string | null;`,
		`free?: Record<string, number>;`, `[key: string]: unknown;`, `small?: "a\"b" | "*/ end" | 1 | true | null;`,
		`e: string;`, `r?: unknown;`, `q?: unknown;`, `// Tool "delete": through call(`, `// Server "call": through call only`,
		`export type JunkArgs = unknown;`, `// Tool "9lives": through call(`,
		`export function weird______name(`, `Tool *\/ weird "*\/`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("declarations lack %q", want)
		}
	}
	if strings.Contains(text, "default: typeof") || strings.Contains(text, "empty: typeof") {
		t.Errorf("a server that is no namespace value is in the default export")
	}
	tool := func(name string) Model {
		for _, tl := range servers[0].Tools {
			if tl.Name == name {
				return tl.Model
			}
		}
		t.Fatalf("no tool %s", name)
		return Model{}
	}
	m := tool("deep")
	depth := 0
	for ty := m.Args; ty != nil && ty.Kind == KindObject && len(ty.Fields) > 0; ty = ty.Fields[0].Type {
		depth++
	}
	if depth > MaxDepth+1 {
		t.Fatalf("read %d levels deep", depth)
	}
	for _, tl := range servers[0].Tools {
		for _, lang := range []string{Python, TypeScriptLang} {
			if s := Signature(lang, "hostile", tl.ID, tl.Model); len(s) > MaxSignature || strings.Contains(s, "\n") {
				t.Errorf("%s signature of %s: %d bytes %q", lang, tl.Name, len(s), s[:min(len(s), 200)])
			}
		}
		b, err := json.Marshal(tl.Model)
		if err != nil || len(b) > 4<<20 {
			t.Errorf("model of %s: %v, %d bytes", tl.Name, err, len(b))
		}
	}
	if s := Signature(Python, "hostile", "cycle", tool("cycle")); !strings.Contains(s, `"children"?: list[dict]`) {
		t.Errorf("a cycle in a Python signature: %s", s)
	}
}

// TestDeclarationsTypeCheck compiles the declarations, real and hostile,
// with TypeScript itself, and checks that they catch a wrong argument.
// It needs npx and the npm registry (or npm's cache), and skips without
// npx.
func TestDeclarationsTypeCheck(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("no npx on this machine")
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("runbox_tools.d.ts", TypeScript(append(everything(t), hostile()...)))
	write("ok.ts", `import tools, { everything, call, ToolError } from "runbox_tools";
async function main(): Promise<void> {
  const e: unknown = await everything.echo({ message: "hi" });
  await tools.everything.get_sum({ a: 1, b: 2 });
  const w = await everything.get_structured_content({ location: "Chicago" });
  const n: number = w.temperature;
  await everything.get_resource_reference();
  await call("everything", "get-sum", { a: 1, b: 2 });
  try { await everything.echo({ message: "x" }); } catch (err) { if (err instanceof ToolError) console.log(err.kind, err.toolMessage); }
  console.log(e, n);
}
main();
`)
	write("tsconfig.json", `{"compilerOptions":{"strict":true,"noEmit":true,"target":"es2022","module":"nodenext","moduleResolution":"nodenext","esModuleInterop":true,"skipLibCheck":false,"types":[]},"files":["runbox_tools.d.ts","ok.ts"]}`)
	tsc := func() (string, error) {
		cmd := exec.Command(npx, "-y", "-p", "typescript@5.9.3", "tsc", "-p", dir)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := tsc(); err != nil {
		if strings.Contains(out, "ENOTFOUND") || strings.Contains(out, "EAI_AGAIN") {
			t.Skipf("npm cannot fetch typescript: %s", out)
		}
		t.Fatalf("tsc on the declarations: %v\n%s", err, out)
	}
	write("ok.ts", `import { everything } from "runbox_tools";
everything.get_sum({ a: 1, b: "2" });
everything.echo({ message: "x", extra: 1 });
everything.get_annotated_message({ messageType: "warning" });
`)
	out, err := tsc()
	if err == nil {
		t.Fatal("tsc accepted wrong arguments")
	}
	for _, want := range []string{"ok.ts(2,", "ok.ts(3,", "ok.ts(4,"} {
		if !strings.Contains(out, want) {
			t.Errorf("tsc did not flag %s:\n%s", want, out)
		}
	}
}
