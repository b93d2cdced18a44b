//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// The TypeScript programs every backend is asked to answer alike, as a
// one-off run and as a session's first cell.
var typeScriptCases = []struct {
	name, code string
	check      func(t *testing.T, r contract.Result)
}{
	{"top-level await", "const n: number = await Promise.resolve(41) + 1;\nconsole.log(n)\n", func(t *testing.T, r contract.Result) {
		mustOK(t, r)
		if r.Stdout != "42\n" {
			t.Fatalf("stdout %q, want 42", r.Stdout)
		}
	}},
	{"a type error runs nothing", "console.log('ran');\nconst s: string = 1;\nconsole.log(s);\n", func(t *testing.T, r contract.Result) {
		e := wantError(t, r, contract.KindSyntax, "")
		if e.Type != "TS2322" || e.Line != 2 || e.Column != 7 || !strings.Contains(e.Message, "not assignable to type 'string'") {
			t.Fatalf("error %+v, want TS2322 at 2:7", e)
		}
		if strings.Contains(r.Stdout, "ran") {
			t.Fatalf("the program ran before its type error was reported: stdout %q", r.Stdout)
		}
	}},
	{"a thrown error's TypeScript line", "interface Box { n: number }\n\nfunction open(b: Box): number {\n  if (b.n > 1) throw new RangeError(`too big: ${b.n}`);\n  return b.n;\n}\nopen({ n: 5 });\n", func(t *testing.T, r contract.Result) {
		e := wantError(t, r, contract.KindRuntime, "")
		if e.Type != "RangeError" || e.Line != 4 || e.Message != "too big: 5" {
			t.Fatalf("error %+v, want RangeError at line 4\nstderr %s", e, r.Stderr)
		}
	}},
	{"node's types and imports", "import { readFileSync } from 'fs';\nimport * as path from 'path';\nconst me: string = readFileSync(path.join(process.cwd(), 'main.ts'), 'utf8');\nconsole.log(me.length > 0, typeof require);\n", func(t *testing.T, r contract.Result) {
		mustOK(t, r)
		if r.Stdout != "true function\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	}},
}

func testTypeScript(t *testing.T, s *server) {
	for _, tc := range typeScriptCases {
		t.Run(tc.name+"/one-off", func(t *testing.T) {
			r, _ := s.call(t, map[string]any{"language": "typescript", "code": tc.code, "timeout_seconds": 120})
			tc.check(t, r)
		})
		t.Run(tc.name+"/session", func(t *testing.T) {
			id := s.open(t, "typescript")
			defer s.tool(t, "session_close", map[string]any{"session_id": id})
			tc.check(t, s.in(t, id, "typescript", tc.code, "timeout_seconds", 120))
		})
	}
	t.Run("session state and checks across cells", func(t *testing.T) {
		id := s.open(t, "typescript")
		defer s.tool(t, "session_close", map[string]any{"session_id": id})
		mustOK(t, s.in(t, id, "typescript", "import os from 'os';\nconst base: number = await Promise.resolve(40);\nfunction add(a: number, b: number): number { return a + b; }\n", "timeout_seconds", 120))
		r := s.in(t, id, "typescript", "console.log(add(base, 2), typeof os.cpus);\n", "timeout_seconds", 120)
		mustOK(t, r)
		if r.Stdout != "42 function\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
		// The earlier cells' declarations are known to the check: a wrong
		// argument is the new cell's type error, at the cell's own line.
		r = s.in(t, id, "typescript", "console.log('ran');\n\nadd(base, 'two');\n", "timeout_seconds", 120)
		e := wantError(t, r, contract.KindSyntax, "")
		if e.Type != "TS2345" || e.Line != 3 || strings.Contains(r.Stdout, "ran") {
			t.Fatalf("error %+v, stdout %q; want TS2345 at line 3 and nothing run", e, r.Stdout)
		}
		r = s.in(t, id, "typescript", "const big = (n: number) => {\n  if (n > 1) throw new Error('cell ' + n);\n};\nbig(add(1, 1));\n", "timeout_seconds", 120)
		if e := wantError(t, r, contract.KindRuntime, ""); e.Line != 2 || e.Message != "cell 2" {
			t.Fatalf("error %+v, want line 2\nstderr %s", e, r.Stderr)
		}
	})
}

// waitForEnd makes every call wait for its run's end: a loaded machine's
// cold compiler may take longer than the default answer_within_seconds.
const waitForEnd = "limits:\n  answer_within_seconds: 0\n"

// TestTypeScriptDocker: TypeScript one-off runs and sessions on Docker.
func TestTypeScriptDocker(t *testing.T) {
	testTypeScript(t, dockerServer(t, waitForEnd))
}

// TestTypeScriptGVisor: the same under gVisor.
func TestTypeScriptGVisor(t *testing.T) {
	testTypeScript(t, gvisorServer(t, waitForEnd))
}

// TestTypeScriptTranspileOnly: type_check: false runs a program with a
// type error as its JavaScript would run.
func TestTypeScriptTranspileOnly(t *testing.T) {
	s := dockerServer(t, waitForEnd+"languages:\n  - name: typescript\n    image: runbox/sandbox:bookworm\n    file: main.ts\n    command: [node, /tmp/.runbox/run/runbox_ts.js, \"{file}\"]\n    error_format: typescript\n    type_check: false\n")
	code := "const s: string = 1;\nconsole.log(s + 1);\n"
	r, _ := s.call(t, map[string]any{"language": "typescript", "code": code, "timeout_seconds": 120})
	mustOK(t, r)
	if r.Stdout != "2\n" {
		t.Fatalf("stdout %q", r.Stdout)
	}
	id := s.open(t, "typescript")
	defer s.tool(t, "session_close", map[string]any{"session_id": id})
	r = s.in(t, id, "typescript", code, "timeout_seconds", 120)
	mustOK(t, r)
	if r.Stdout != "2\n" {
		t.Fatalf("session: stdout %q", r.Stdout)
	}
}

// TestTypeScriptPooled: a pooled box's one-off runs with the runner that
// was started ahead of it (compiler loaded), and answers as a cold one.
func TestTypeScriptPooled(t *testing.T) {
	s := dockerServer(t, waitForEnd+"pool:\n  size: 1\n")
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; ; i++ {
		r, _ := s.call(t, map[string]any{"language": "typescript", "code": fmt.Sprintf("const n: number = await Promise.resolve(%d);\nconsole.log(n + 1);\n", i), "timeout_seconds": 120})
		mustOK(t, r)
		if r.Stdout != fmt.Sprintf("%d\n", i+1) {
			t.Fatalf("stdout %q", r.Stdout)
		}
		if r.Metrics.Pooled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no run was pooled")
		}
		time.Sleep(5 * time.Second)
	}
	r, _ := s.call(t, map[string]any{"language": "typescript", "code": "console.log('ran');\nconst s: string = 1;\n", "timeout_seconds": 120})
	if e := wantError(t, r, contract.KindSyntax, ""); e.Type != "TS2322" || e.Line != 2 || strings.Contains(r.Stdout, "ran") {
		t.Fatalf("error %+v, stdout %q", e, r.Stdout)
	}
}

// TestTypeScriptSavedTool: a tool saved in TypeScript reads its arguments
// and answers.
func TestTypeScriptSavedTool(t *testing.T) {
	s := dockerServer(t, waitForEnd+"saved_tools:\n  enabled: true\n  dir: "+t.TempDir()+"\n")
	a := s.tool(t, "save_tool", map[string]any{"name": "ts_sum", "description": "Adds a and b.", "language": "typescript",
		"code":         "import { readFileSync } from 'fs';\ninterface Args { a: number; b: number }\nconst args: Args = JSON.parse(readFileSync(0, 'utf8'));\nconsole.log(args.a + args.b);\n",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}, "required": []string{"a", "b"}}})
	if a.Error != nil {
		t.Fatalf("save_tool: %+v", a.Error)
	}
	r := structuredCall[contract.Result](t, s.c, 3*time.Minute, false, "ts_sum", map[string]any{"a": 40, "b": 2})
	mustOK(t, r)
	if r.Stdout != "42\n" {
		t.Fatalf("stdout %q, stderr %q", r.Stdout, r.Stderr)
	}
}

// TestTypeScriptToolCalls: a TypeScript program imports runbox_tools and
// calls a tool server, one-off and in a session. runbox-init has no
// declarations for it yet (its answer to the typings request is a
// refusal), so runbox_tools is typed any and the program checks.
func TestTypeScriptToolCalls(t *testing.T) {
	dir := t.TempDir()
	s := dockerServer(t, waitForEnd+toolServers(t, dir))
	code := "import tools from 'runbox_tools';\nconst sum: unknown = await tools.everything.get_sum({ a: 40, b: 2 });\nconsole.log(JSON.stringify(sum));\n"
	check := func(t *testing.T, r contract.Result) {
		t.Helper()
		mustOK(t, r)
		if !strings.Contains(r.Stdout, "42") {
			t.Fatalf("stdout %q", r.Stdout)
		}
	}
	r, _ := s.call(t, map[string]any{"language": "typescript", "code": code, "timeout_seconds": 120})
	check(t, r)
	id := s.open(t, "typescript")
	defer s.tool(t, "session_close", map[string]any{"session_id": id})
	check(t, s.in(t, id, "typescript", code, "timeout_seconds", 120))
	// A type error still is one, with the tools' declarations in the check.
	r = s.in(t, id, "typescript", "const n: number = 'x';\n", "timeout_seconds", 120)
	if e := wantError(t, r, contract.KindSyntax, ""); e.Type != "TS2322" || e.Line != 1 {
		t.Fatalf("error %+v", e)
	}

	// The bindings are typed from the tools' schemas: echo's message is a
	// string, get-sum's a and b numbers. A call that fits them runs; a
	// wrong argument's type or name fails the check, so nothing of the
	// program runs and no call leaves the box (its first line prints).
	echo := "import tools from 'runbox_tools';\nconst r = await tools.everything.echo({ message: 'typed hi' });\nconsole.log(JSON.stringify(r));\n"
	for i, way := range []func(code string) contract.Result{
		func(code string) contract.Result {
			r, _ := s.call(t, map[string]any{"language": "typescript", "code": code, "timeout_seconds": 120})
			return r
		},
		func(code string) contract.Result { return s.in(t, id, "typescript", code, "timeout_seconds", 120) },
	} {
		if r := way(echo); r.Status != contract.StatusOK || !strings.Contains(r.Stdout, "typed hi") {
			t.Fatalf("echo through the typed bindings (way %d: one-off, session): %s %+v stdout %q stderr %q", i, r.Status, r.Error, r.Stdout, r.Stderr)
		}
		for _, bad := range []struct{ code, why string }{
			{"import tools from 'runbox_tools';\nconsole.log('ran');\nawait tools.everything.get_sum({ a: 'forty', b: 2 });\n", "a string for a number"},
			{"import tools from 'runbox_tools';\nconsole.log('ran');\nawait tools.everything.echo({ msg: 'hi' });\n", "an argument the tool does not have"},
		} {
			r := way(bad.code)
			e := wantError(t, r, contract.KindSyntax, "")
			if e.Line != 3 || !strings.HasPrefix(e.Type, "TS") || strings.Contains(r.Stdout, "ran") {
				t.Fatalf("way %d (one-off, session): %s: error %+v stdout %q, want a type error on line 3 before anything ran", i, bad.why, e, r.Stdout)
			}
		}
	}
}
