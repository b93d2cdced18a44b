//go:build e2e

package e2e

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestOKPerLanguage(t *testing.T) {
	for lang, code := range map[string]string{
		"python":     "import sys; data = sys.stdin.read(); print(data.upper(), end='')",
		"javascript": "let d=''; process.stdin.on('data', c => d += c).on('end', () => process.stdout.write(d.toUpperCase()));",
		"bash":       "tr a-z A-Z",
	} {
		t.Run(lang, func(t *testing.T) {
			r := run(t, lang, code, "stdin", "hello stdin\n")
			mustOK(t, r)
			if r.Stdout != "HELLO STDIN\n" || r.ExitCode == nil || *r.ExitCode != 0 || r.Language != lang {
				t.Fatalf("result %+v", r)
			}
			m := r.Metrics
			if m.WallMs <= 0 || m.PeakMemoryBytes <= 0 || m.QueueMs < 0 || r.Image == "" || r.Isolation != "runc" || !strings.HasPrefix(r.RunID, "r_") {
				t.Fatalf("metrics/identity %+v image %q isolation %q", m, r.Image, r.Isolation)
			}
		})
	}
}

func TestSyntaxErrors(t *testing.T) {
	cases := []struct {
		lang, code, typ string
		line, column    int
	}{
		{"python", "x = 1\ny = 2\nprint(x +* y)\n", "SyntaxError", 3, 10},
		{"python", "def f():\nreturn 1\n", "IndentationError", 2, 0},
		{"javascript", "const a = 1;\nconst b = ;\n", "SyntaxError", 2, 11},
		{"bash", "echo start\nif true; then\n  echo x\n", "", 4, 0},
		{"bash", "echo one\necho two )\n", "", 2, 0},
	}
	for _, c := range cases {
		t.Run(c.lang+"/"+c.typ, func(t *testing.T) {
			r := run(t, c.lang, c.code)
			e := wantError(t, r, contract.KindSyntax, "")
			if e.Type != c.typ || e.Line != c.line || (c.column > 0 && e.Column != c.column) {
				t.Fatalf("got %+v, want %s at %d:%d\nstderr: %s", e, c.typ, c.line, c.column, r.Stderr)
			}
			if strings.Contains(r.Stdout, "start") || strings.Contains(r.Stdout, "one") {
				t.Fatalf("code with a syntax error ran: %s", r.Stdout)
			}
		})
	}
}

func TestRuntimeErrors(t *testing.T) {
	cases := []struct {
		lang, code, typ, msg string
		line                 int
	}{
		{"python", "import numpy as np\n\ndef div(a):\n    return 1 // a\n\nprint('before')\ndiv(0)\n", "ZeroDivisionError", "integer division or modulo by zero", 4},
		{"python", "import json\njson.loads('{bad')\n", "json.decoder.JSONDecodeError", "Expecting property name", 2},
		{"javascript", "console.log('before');\nfunction f() {\n  return missing + 1;\n}\nf();\n", "ReferenceError", "missing is not defined", 3},
		{"javascript", "class Oops extends Error {}\nsetTimeout(() => { throw new TypeError('late'); }, 10);\n", "TypeError", "late", 2},
		{"bash", "echo before\nno_such_command --flag\n", "", "no_such_command: command not found", 2},
	}
	for _, c := range cases {
		t.Run(c.lang+"/"+c.typ, func(t *testing.T) {
			r := run(t, c.lang, c.code)
			e := wantError(t, r, contract.KindRuntime, "")
			if e.Type != c.typ || !strings.Contains(e.Message, c.msg) || e.Line != c.line {
				t.Fatalf("got %+v, want %s %q on line %d\nstderr: %s", e, c.typ, c.msg, c.line, r.Stderr)
			}
			if r.ExitCode == nil || *r.ExitCode == 0 {
				t.Fatalf("exit code %v", r.ExitCode)
			}
		})
	}
	r := run(t, "bash", "echo partial; exit 7")
	e := wantError(t, r, contract.KindRuntime, "")
	if *r.ExitCode != 7 || r.Stdout != "partial\n" || !strings.Contains(e.Message, "status 7") {
		t.Fatalf("plain exit: %+v %+v", r, e)
	}
}

func TestTimeouts(t *testing.T) {
	for lang, code := range map[string]string{
		"python":     "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.01)\n",
		"javascript": "process.on('SIGTERM', () => {});\nconsole.log('started');\nwhile (true) {}\n",
		"bash":       "trap '' TERM INT\necho started\nwhile :; do :; done\n",
	} {
		t.Run(lang, func(t *testing.T) {
			r := run(t, lang, code, "timeout_seconds", 1.5)
			wantError(t, r, contract.KindTimeout, contract.LimitWallTime)
			if !strings.HasPrefix(r.Stdout, "started") {
				t.Errorf("output before the timeout is lost: %q", r.Stdout)
			}
			if r.Metrics.WallMs < 1500 || r.Metrics.WallMs > 2500 {
				t.Errorf("killed after %d ms; the deadline was 1500 ms", r.Metrics.WallMs)
			}
		})
	}
}

func TestOOM(t *testing.T) {
	for lang, code := range map[string]string{
		"python":     "blocks = []\nwhile True:\n    blocks.append(bytearray(32 * 1024 * 1024))\n",
		"javascript": "const keep = [];\nwhile (true) { keep.push(Buffer.alloc(32 * 1024 * 1024, 1)); }\n",
		"bash":       "x=$(head -c 2000000000 /dev/zero | tr '\\0' a)\necho ${#x}\n",
	} {
		t.Run(lang, func(t *testing.T) {
			r := run(t, lang, code, "timeout_seconds", 60)
			wantError(t, r, contract.KindOOM, contract.LimitMemory)
		})
	}
}

func TestResourceLimits(t *testing.T) {
	cases := []struct {
		name, lang, code string
		limit            contract.Limit
	}{
		{"pids/bash", "bash", "for i in $(seq 1 400); do sleep 5 & done; wait", contract.LimitPids},
		{"pids/python", "python", "import os, time\nkids = []\nfor i in range(400):\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(5); os._exit(0)\n    kids.append(pid)\n", contract.LimitPids},
		{"pids/javascript", "javascript", "const { spawn } = require('child_process');\nfor (let i = 0; i < 400; i++) spawn('sleep', ['5']);\n", contract.LimitPids},
		{"disk/javascript", "javascript", "const fs = require('fs');\nconst mb = Buffer.alloc(1 << 20, 120);\nfor (let i = 0; i < 200; i++) fs.appendFileSync('big.bin', mb);\n", contract.LimitDisk},
		{"open_files/bash", "bash", "for i in $(seq 1 5000); do exec {fd}</dev/null || exit 1; done", contract.LimitOpenFiles},
		{"disk/python", "python", "with open('big.bin', 'wb') as f:\n    for _ in range(200):\n        f.write(b'x' * (1 << 20))\n", contract.LimitDisk},
		{"disk/tmp", "bash", "head -c 200000000 /dev/zero > /tmp/fill", contract.LimitDisk},
		{"inodes/bash", "bash", "mkdir many && cd many && for i in $(seq 1 20000); do : > f$i || exit 1; done", contract.LimitDisk},
		{"open_files/python", "python", "fs = [open('/dev/null') for _ in range(5000)]\n", contract.LimitOpenFiles},
		{"open_files/javascript", "javascript", "const fs = require('fs');\nconst fds = [];\nfor (let i = 0; i < 5000; i++) fds.push(fs.openSync('/dev/null', 'r'));\n", contract.LimitOpenFiles},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.lang, c.code, "timeout_seconds", 60)
			wantError(t, r, contract.KindResourceLimit, c.limit)
		})
	}
}

func TestOutputLimit(t *testing.T) {
	for lang, code := range map[string]string{
		"python":     "import sys\nsys.stdout.write('head\\n' + 'x' * 3000000 + '\\ntail\\n')\n",
		"javascript": "process.stdout.write('head\\n' + 'x'.repeat(3000000) + '\\ntail\\n');\n",
		"bash":       "echo head; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo tail",
	} {
		t.Run(lang, func(t *testing.T) {
			r := run(t, lang, code)
			wantError(t, r, contract.KindOutputLimit, "")
			if !r.StdoutTruncated || !strings.HasPrefix(r.Stdout, "head\n") || !strings.HasSuffix(r.Stdout, "\ntail\n") || len(r.Stdout) > int(lim.OutputBytes)+200 {
				t.Fatalf("truncated %v, %d bytes kept, head %q tail %q", r.StdoutTruncated, len(r.Stdout), r.Stdout[:min(10, len(r.Stdout))], r.Stdout[max(0, len(r.Stdout)-10):])
			}
		})
	}
	r := run(t, "bash", "head -c 100000 /dev/urandom")
	if !strings.Contains(r.Stdout, "\uFFFD") || r.Status != contract.StatusOK {
		t.Fatalf("binary output is not turned into valid text: status %s", r.Status)
	}
}

func TestInvalidRequests(t *testing.T) {
	big := strings.Repeat("#", int(lim.CodeBytes)+1)
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown language", map[string]any{"language": "cobol", "code": "x"}, `unknown language "cobol"`},
		{"missing language", map[string]any{"code": "x"}, "language is required"},
		{"code too big", map[string]any{"language": "python", "code": big}, "over the"},
		{"NUL in code", map[string]any{"language": "python", "code": "print(1)\x00print(2)"}, "NUL byte"},
		{"dotdot path", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "a/../../x", "content": "x"}}}, ".. is not allowed"},
		{"absolute path", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "/etc/passwd", "content": "x"}}}, "absolute"},
		{"bad base64", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "a.bin", "content": "!!!", "encoding": "base64"}}}, "not valid base64"},
		{"wrong type", map[string]any{"language": "python", "code": 12}, "code must be a string"},
		{"unknown field", map[string]any{"language": "python", "code": "print(1)", "timeout": 5}, `unknown field "timeout"`},
		{"timeout above max", map[string]any{"language": "python", "code": "print(1)", "timeout_seconds": 100000}, "at most"},
		{"code file name taken", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "main.py", "content": "x"}}}, "where the code is saved"},
	}
	before := len(boxes())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, res := shared(t).call(t, c.args)
			e := wantError(t, r, contract.KindInvalidRequest, "")
			if !strings.Contains(e.Message, c.want) || r.ExitCode != nil || !res.IsError {
				t.Fatalf("got %+v, want %q", e, c.want)
			}
		})
	}
	if after := len(boxes()); after > before {
		t.Fatalf("invalid requests created boxes")
	}
}

func TestInputFilesAndArtifacts(t *testing.T) {
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	r, res := shared(t).call(t, map[string]any{"language": "python", "code": `
import os, shutil
from helper import greet
print(greet(open("data/in.txt").read().strip()))
os.makedirs("out", exist_ok=True)
shutil.copy("pixel.png", "out/copy.png")
open("out/report.csv", "w").write("a,b\n1,2\n")
os.symlink("/etc/passwd", "out/passwd")
os.symlink("/proc/self/environ", "env")
`, "files": []any{
		map[string]any{"path": "helper.py", "content": "def greet(n):\n    return 'hello ' + n\n"},
		map[string]any{"path": "data/in.txt", "content": "files\n"},
		map[string]any{"path": "pixel.png", "content": png, "encoding": "base64"},
	}})
	mustOK(t, r)
	if r.Stdout != "hello files\n" {
		t.Fatalf("stdout %q stderr %s", r.Stdout, r.Stderr)
	}
	var got []string
	for _, a := range r.Artifacts {
		got = append(got, a.Path+":"+a.MimeType)
		if len(a.SHA256) != 64 || a.SizeBytes <= 0 || a.URI != contract.ArtifactURI(r.RunID, a.Path) {
			t.Errorf("artifact %+v", a)
		}
	}
	if strings.Join(got, ",") != "out/copy.png:image/png,out/report.csv:text/csv" {
		t.Fatalf("artifacts %v (inputs, the code and symlinks must not be artifacts)", got)
	}
	var images int
	for _, c := range res.Content {
		if _, ok := mcp.AsImageContent(c); ok {
			images++
		}
	}
	raw, _ := base64.StdEncoding.DecodeString(png)
	if images != 1 || r.Artifacts[0].SizeBytes != int64(len(raw)) {
		t.Fatalf("image content blocks: %d", images)
	}
}

func TestArtifactCaps(t *testing.T) {
	r := run(t, "bash", "mkdir -p out; for i in $(seq 1 100); do echo $i > out/f$(printf %03d $i).txt; done")
	mustOK(t, r)
	if len(r.Artifacts) != lim.Artifacts || r.ArtifactsOmitted != 100-lim.Artifacts {
		t.Fatalf("%d artifacts, %d omitted", len(r.Artifacts), r.ArtifactsOmitted)
	}
	r = run(t, "bash", "head -c 40000000 /dev/zero > a.bin; echo small > b.txt")
	mustOK(t, r)
	if len(r.Artifacts) != 2 || !r.Artifacts[0].ContentOmitted || r.Artifacts[0].SizeBytes != 40000000 || r.Artifacts[1].ContentOmitted {
		t.Fatalf("byte cap: %+v", r.Artifacts)
	}
}

// TestForkBombsNeverKillInit repeats a fork bomb: runbox-init shares the
// pids limit with the program and must still report every time (it once
// died about one run in twenty, unable to start a thread).
func TestForkBombsNeverKillInit(t *testing.T) {
	code := "import os, threading, time\nfor i in range(400):\n    try:\n        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n    except RuntimeError:\n        pass\n    if os.fork() == 0:\n        time.sleep(5); os._exit(0)\n"
	for i := 0; i < 15; i++ {
		r := run(t, "python", code, "timeout_seconds", 30)
		wantError(t, r, contract.KindResourceLimit, contract.LimitPids)
	}
}
