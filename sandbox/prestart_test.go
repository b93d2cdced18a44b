package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/internal/pymain"
)

// The prestarted interpreter's loader, run by the host's python3 with a
// slow package to preload: a job that comes while the preload is under
// way runs to its end whatever it imports, the loader leaves nothing of
// its own on sys.meta_path once the preload is over, and what a preload
// that ended before the job made is frozen (gc.freeze), never the job's
// own objects, which are collected at its end as in a cold run.
func TestPythonLoaderWithPreloadUnderWay(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	lib := t.TempDir()
	pkg := filepath.Join(lib, "slowpkg")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	// The package says it has begun (a marker file), and each of its
	// modules waits until the job has begun (another), so the job always
	// comes while the preload is under way; then each takes a little CPU.
	var init strings.Builder
	init.WriteString("import os\nopen(os.environ['STARTED'], 'w').close()\n")
	for i := range 40 {
		name := "m" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		init.WriteString("from . import " + name + "\n")
		mod := "import os, time\nwhile not os.path.exists(os.environ['BEGUN']):\n    time.sleep(0.01)\nsum(range(20000))\n"
		if err := os.WriteFile(filepath.Join(pkg, name+".py"), []byte(mod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	init.WriteString("done = True\n")
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte(init.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// quickpkg says it is loaded as its last line.
	if err := os.WriteFile(filepath.Join(lib, "quickpkg.py"), []byte("import os\nopen(os.environ['LOADED'], 'w').close()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const begin = "import os\nopen(os.environ['BEGUN'], 'w').close()\n"
	// A cycle whose finalizer prints: the loader's exit collects it, as a
	// cold interpreter's shutdown would.
	const cycle = "class C:\n    def __del__(self):\n        print('finalized')\nc = C()\nc.me = c\ndel c\n"
	for name, c := range map[string]struct{ preload, after, code, want string }{
		"imports the module under way": {"slowpkg", "started", begin + "import gc, slowpkg\nprint(slowpkg.done, gc.get_freeze_count())\n", "True 0\n"},
		"imports nothing":              {"slowpkg", "started", begin + "print(sum(range(100000)))\n" + cycle, "4999950000\nfinalized\n"},
		"a thread imports a new module": {"slowpkg", "started", begin + "import threading\nr = []\nt = threading.Thread(target=lambda: r.append(__import__('json').dumps([1])))\nt.start(); t.join()\nprint(r)\n",
			"['[1]']\n"},
		"waits for the preload's end": {"slowpkg", "started", begin + "import sys, time\nimport slowpkg\n" +
			"for _ in range(3000):\n    if not any('Rbx' in repr(f) for f in sys.meta_path):\n        break\n    time.sleep(0.01)\n" +
			"print([repr(f) for f in sys.meta_path if 'Rbx' in repr(f)])\n", "[]\n"},
		"comes after the preload": {"quickpkg", "loaded", "import gc, sys, time\n" +
			"for _ in range(3000):\n    if gc.get_freeze_count() and not any('Rbx' in repr(f) for f in sys.meta_path):\n        break\n    time.sleep(0.01)\n" +
			"print(gc.get_freeze_count() > 0)\n" + cycle, "True\nfinalized\n"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "main.py")
			if err := os.WriteFile(path, []byte(c.code), 0o644); err != nil {
				t.Fatal(err)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			loader := pymain.Source + strings.Replace(pythonLoader, preloadList, `["`+c.preload+`"]`, 1)
			cmd := exec.CommandContext(ctx, python, "-c", loader)
			var out, errb bytes.Buffer
			cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &errb
			after := filepath.Join(dir, c.after)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + lib, "PYTHONDONTWRITEBYTECODE=1",
				"BEGUN=" + filepath.Join(dir, "begun"), "STARTED=" + filepath.Join(dir, "started"), "LOADED=" + filepath.Join(dir, "loaded")}
			cmd.ExtraFiles = []*os.File{nil, r}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The job goes once the preload is where the case wants it.
			for {
				if _, err := os.Stat(after); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatal("the preload never began")
				case <-time.After(10 * time.Millisecond):
				}
			}
			_, _ = w.WriteString(path + "\n")
			w.Close()
			err = cmd.Wait()
			if err != nil || out.String() != c.want {
				t.Fatalf("err %v, stdout %q (want %q), stderr %s", err, out.String(), c.want, errb.String())
			}
		})
	}
}
