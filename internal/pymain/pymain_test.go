package pymain

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// run runs argv and returns its stdout, stderr and exit status.
func run(t *testing.T, dir string, argv ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &errb
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1"}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// A file run by the runner from an interpreter started with -c answers as
// `python3 FILE`: output, the error's report, the exit status, and what the
// program sees of __main__, argv and sys.path.
func TestRunsAsPython3File(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	runner := Source + `
_path = sys.argv[1]
_main = _rbx_new_main()
_rbx_enter(_main, _path)
sys.exit(_rbx_run(_path, _main.__dict__, False))
`
	for name, code := range map[string]string{
		"names":       "import sys, helper\nprint(__name__, __file__, sys.argv, sys.path[:2], helper.X)\nprint(list(globals()))\n",
		"error":       "x = 1\n\ndef f():\n    return 1 / 0\nf()\n",
		"syntax":      "def f(:\n",
		"late syntax": "x = 1\nreturn x\n",
		"exit code":   "import sys\nprint('out')\nsys.exit(3)\n",
		"exit text":   "raise SystemExit('bye')\n",
		"exit none":   "import sys\nsys.exit()\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "main.py")
			if err := os.WriteFile(path, []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "helper.py"), []byte("X = 7\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			wantOut, wantErr, wantExit := run(t, dir, python, path)
			out, errs, exit := run(t, dir, python, "-c", runner, path)
			if out != wantOut || errs != wantErr || exit != wantExit {
				t.Fatalf("the runner:\n%q\n%q\nexit %d\npython3 FILE:\n%q\n%q\nexit %d", out, errs, exit, wantOut, wantErr, wantExit)
			}
		})
	}
}
