//go:build linux

package boxinit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/langerr"
)

// bothWays runs code as a one-off job (the interpreter on the file, as the
// manifest's commands do) and as the first cell of a new session, with the
// same files, stdin and caps, and returns both reports and artifacts.
func bothWays(t *testing.T, driver, interpreter, code string, timeout time.Duration, files []initproto.File, stdin []byte) (oneOff, cell *initproto.Report, oneOffData, cellData [][]byte, oneOffPath, cellPath string) {
	t.Helper()
	path, err := exec.LookPath(interpreter)
	if err != nil {
		t.Skipf("%s not installed: %v", interpreter, err)
	}
	file := map[string]string{"python": "main.py", "node": "main.js", "bash": "main.sh"}[driver]
	env := []string{"PATH=" + os.Getenv("PATH"), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}
	newJob := func(dir string) *initproto.Job {
		return &initproto.Job{Argv: []string{path, filepath.Join(dir, file)}, Dir: dir, CodePath: filepath.Join(dir, file),
			Code: []byte(code), Files: files, Stdin: stdin, Env: append(env, "HOME="+dir), TimeoutMs: timeout.Milliseconds(),
			MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20}
	}
	job := newJob(t.TempDir())
	oneOffPath = job.CodePath
	oneOff, oneOffData = Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}})

	dir := t.TempDir()
	spec := initproto.Session{Driver: driver, Interpreter: path, Dir: dir, CodePath: filepath.Join(dir, file), Env: append(env, "HOME="+dir)}
	s := newSession(spec, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}})
	defer func() {
		if s.lost == "" {
			s.lose("test over")
		}
		s.r.stop()
	}()
	cell, cellData = s.run(newJob(dir), nil)
	cellPath = spec.CodePath
	if oneOff.InitError != "" || cell.InitError != "" {
		t.Fatalf("init errors: %q, %q", oneOff.InitError, cell.InitError)
	}
	return oneOff, cell, oneOffData, cellData, oneOffPath, cellPath
}

// answer is what an agent acts on in a report.
func answer(driver string, rep *initproto.Report, codePath, code string) string {
	e, ok := langerr.Parse(driver, string(rep.Stderr), codePath, code)
	if !ok {
		e = langerr.Error{}
	}
	return fmt.Sprintf("exit %d, signal %d, timed out %v, check failed %v, stdout %q, error %s %s line %d",
		rep.ExitCode, rep.Signal, rep.TimedOut, rep.CheckFailed, rep.Stdout, e.Kind, e.Type, e.Line)
}

// The same program answers the same as a one-off job and as a session's
// cell: status, error, its line, timeout, stdout.
func TestCellAnswersAsOneOff(t *testing.T) {
	cases := []struct {
		name, driver, interpreter, code string
		timeout                         time.Duration
		want                            string // in the answer, both ways
	}{
		{"node error after an await", "node", "node",
			"async function main() {\n  await null\n  throw new TypeError('bad shape')\n}\nmain()\n", cellTimeout, "error runtime TypeError line 3"},
		{"node process.exit", "node", "node", "console.log('x'); process.exit(4)\nconsole.log('not reached')\n", cellTimeout, `exit 4, signal 0, timed out false, check failed false, stdout "x\n"`},
		{"node process.exit in a timer", "node", "node", "setTimeout(() => { console.log('late'); process.exit(5) }, 10)\nsetInterval(() => {}, 1000)\n", cellTimeout, `exit 5, signal 0, timed out false, check failed false, stdout "late\n"`},
		{"node JSON.parse", "node", "node", "const s = '{bad'\n\nJSON.parse(s)\n", cellTimeout, "error runtime SyntaxError line 3"},
		{"node JSON.parse on line 1", "node", "node", "const data = JSON.parse('{\"a\": 1,}')\nconsole.log(data)\n", cellTimeout, "error runtime SyntaxError line 1"},
		{"node JSON.parse after an await", "node", "node", "(async () => {\n  const text = await Promise.resolve('{bad')\n  return JSON.parse(text)\n})()\n", cellTimeout, "error runtime SyntaxError line 3"},
		{"node a cell declares the driver's names", "node", "node", "const fs = require('fs'), vm = require('vm'), net = require('net'), util = require('util')\nlet current = 1, lines = [], timers = 0\nconsole.log(typeof fs.readFileSync)\n", cellTimeout, `exit 0, signal 0, timed out false, check failed false, stdout "function\n"`},
		{"node setInterval", "node", "node", "setInterval(() => {}, 100)\nconsole.log('started')\n", 2 * time.Second, "timed out true"},
		{"node a timer runs before the end", "node", "node", "setTimeout(() => console.log('later'), 50)\nconsole.log('now')\n", cellTimeout, `exit 0, signal 0, timed out false, check failed false, stdout "now\nlater\n"`},
		{"node a rejection", "node", "node", "\nPromise.reject(new RangeError('no'))\n", cellTimeout, "error runtime RangeError line 2"},
		{"node exitCode", "node", "node", "process.exitCode = 3\n", cellTimeout, "exit 3,"},
		{"node syntax error", "node", "node", "let x = ;\n", cellTimeout, "error syntax SyntaxError line 1"},
		{"python error", "python", "python3", "x = 1\n\n1 / 0\n", cellTimeout, "error runtime ZeroDivisionError line 3"},
		{"python exit", "python", "python3", "import sys\nprint('x')\nsys.exit(4)\n", cellTimeout, `exit 4, signal 0, timed out false, check failed false, stdout "x\n"`},
		{"python timeout", "python", "python3", "import time\nwhile True:\n    time.sleep(0.05)\n", 2 * time.Second, "timed out true"},
		{"bash exit", "bash", "bash", "echo x\nexit 4\n", cellTimeout, `exit 4, signal 0, timed out false, check failed false, stdout "x\n"`},
		{"bash error", "bash", "bash", "echo x\nnosuchcommand\n", cellTimeout, "exit 127,"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oneOff, cell, _, _, oneOffPath, cellPath := bothWays(t, tc.driver, tc.interpreter, tc.code, tc.timeout, nil, nil)
			a, b := answer(tc.driver, oneOff, oneOffPath, tc.code), answer(tc.driver, cell, cellPath, tc.code)
			if !strings.Contains(a, tc.want) {
				t.Fatalf("one-off: %s, want %q; stderr %q", a, tc.want, oneOff.Stderr)
			}
			if a != b {
				t.Fatalf("one-off and cell differ:\none-off %s\ncell    %s\ncell stderr %q", a, b, cell.Stderr)
			}
		})
	}
}

// A cell reads its stdin as a one-off program does, whichever way it reads
// it, and the next cell reads its own.
func TestCellStdinAsOneOff(t *testing.T) {
	for _, tc := range []struct{ name, driver, interpreter, code string }{
		{"node process.stdin", "node", "node", "let d = ''\nprocess.stdin.setEncoding('utf8')\nprocess.stdin.on('data', c => d += c).on('end', () => console.log(d.toUpperCase()))\n"},
		{"node readline", "node", "node", "const rl = require('readline').createInterface({ input: process.stdin })\nconst got = []\nrl.on('line', l => got.push(l)).on('close', () => console.log(got.join('|')))\n"},
		{"node async iteration", "node", "node", "(async () => {\n  let n = 0\n  for await (const c of process.stdin) n += c.length\n  console.log(n)\n})()\n"},
		{"node readFileSync(0)", "node", "node", "console.log(require('fs').readFileSync(0, 'utf8').split('\\n').length)\n"},
		{"node readFileSync('/dev/stdin')", "node", "node", "console.log(require('fs').readFileSync('/dev/stdin').length)\n"},
		{"python", "python", "python3", "import sys\nprint(sys.stdin.read().upper())\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oneOff, cell, _, _, oneOffPath, cellPath := bothWays(t, tc.driver, tc.interpreter, tc.code, cellTimeout, nil, []byte("hello\nstdin\n"))
			a, b := answer(tc.driver, oneOff, oneOffPath, tc.code), answer(tc.driver, cell, cellPath, tc.code)
			if oneOff.ExitCode != 0 || len(oneOff.Stdout) == 0 {
				t.Fatalf("one-off: %s; stderr %q", a, oneOff.Stderr)
			}
			if a != b {
				t.Fatalf("one-off and cell differ:\none-off %s\ncell    %s\ncell stderr %q", a, b, cell.Stderr)
			}
		})
	}
}

// Artifacts past the caps, links and FIFOs, inputs left as they were given
// and the code give the same report both ways.
func TestCellArtifactsAsOneOff(t *testing.T) {
	code := `for i in $(seq 12); do echo $i > f$i.txt; done
head -c 2000000 /dev/zero > big.bin
ln -s /etc/passwd link
mkfifo pipe
printf 'same\n' > in/same.txt
printf 'new\n' > in/changed.txt
cat > /dev/null
`
	files := []initproto.File{{Path: "in/same.txt", Data: []byte("same\n")}, {Path: "in/changed.txt", Data: []byte("old\n")}}
	oneOff, cell, a, b, _, _ := bothWays(t, "bash", "bash", code, cellTimeout, files, []byte("stdin\n"))
	if oneOff.ExitCode != 0 || oneOff.ArtifactsOmitted != 4 || len(oneOff.Artifacts) != 10 {
		t.Fatalf("one-off: exit %d, %d artifacts, %d omitted; stderr %q", oneOff.ExitCode, len(oneOff.Artifacts), oneOff.ArtifactsOmitted, oneOff.Stderr)
	}
	if !reflect.DeepEqual(oneOff.Artifacts, cell.Artifacts) || oneOff.ArtifactsOmitted != cell.ArtifactsOmitted || !reflect.DeepEqual(a, b) {
		t.Fatalf("one-off and cell differ:\none-off %+v (%d omitted)\ncell    %+v (%d omitted)", oneOff.Artifacts, oneOff.ArtifactsOmitted, cell.Artifacts, cell.ArtifactsOmitted)
	}
	var paths []string
	for _, x := range cell.Artifacts {
		paths = append(paths, x.Path)
	}
	if got := strings.Join(paths, ","); got != "big.bin,f1.txt,f10.txt,f11.txt,f12.txt,f2.txt,f3.txt,f4.txt,f5.txt,f6.txt" || cell.Artifacts[0].Sent {
		t.Fatalf("artifacts %s (big.bin sent: %v)", got, cell.Artifacts[0].Sent)
	}
}

// A cell's CPU time is its own, not the interpreter's earlier cells',
// whether the interpreter lives on or exits in the cell.
func TestCellCPUTimeIsItsOwn(t *testing.T) {
	_, run := newTestSession(t, "python", "python3")
	burn := "import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < %s:\n    pass\n"
	first := run(fmt.Sprintf(burn, "0.6"), cellTimeout)
	if first.CPUMs < 550 {
		t.Fatalf("a cell that burned 600 ms of CPU: %d ms", first.CPUMs)
	}
	if rep := run("x = 1\n", cellTimeout); rep.CPUMs >= 300 {
		t.Fatalf("an idle cell after a busy one: %d ms", rep.CPUMs)
	}
	last := run(fmt.Sprintf(burn, "0.4")+"import os\nos._exit(3)\n", cellTimeout)
	if last.Session.Lost == "" || last.ExitCode != 3 || last.CPUMs < 350 || last.CPUMs >= 900 {
		t.Fatalf("a cell that burned 400 ms and ended the interpreter: %d ms, exit %d, lost %q", last.CPUMs, last.ExitCode, last.Session.Lost)
	}
}

// A live process's high-water mark is what a session's cell reports as its
// peak when no cgroup says (gVisor): this process's own is more than 0.
func TestHighWater(t *testing.T) {
	if hw := highWater(os.Getpid()); hw <= 0 {
		t.Fatalf("VmHWM of this process: %d", hw)
	}
	if hw := highWater(0); hw != 0 {
		t.Fatalf("no pid: %d", hw)
	}
}

// liveStat reads a live process's stat through its kept descriptor, again
// and again, and reads nothing of one that has ended and been reaped.
func TestLiveStat(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for range 3 {
		if st, ok := liveStat(pid); !ok || st.Comm != "sleep" || st.Field(14) == "" {
			t.Fatalf("a live process: %+v %v", st, ok)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if st, ok := liveStat(pid); ok {
		t.Fatalf("a reaped process read as %+v", st)
	}
	if st, ok := liveStat(os.Getpid()); !ok || st.Field(4) != strconv.Itoa(os.Getppid()) {
		t.Fatalf("this process: %+v %v", st, ok)
	}
}
