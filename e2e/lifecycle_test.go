//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/sandbox"
)

func TestCancelledCallKillsItsBox(t *testing.T) {
	s := startServer(t, nil)
	defer s.close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := map[string]any{"language": "bash", "code": "echo running; sleep 60", "timeout_seconds": 120}
		_, _ = s.callCtxRaw(ctx, req)
	}()
	mine := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(s.cmd.Process.Pid)
	waitBox(t, mine)
	cancelled := time.Now()
	cancel()
	<-done
	if left := waitNoBoxes(3*time.Second, mine); len(left) > 0 {
		t.Fatalf("box still there %v after the call was cancelled", left)
	}
	t.Logf("box gone %v after cancellation", time.Since(cancelled))
	// The server is still serving.
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo alive"})
	mustOK(t, r)
}

func waitBox(t *testing.T, filter string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for len(boxes(filter)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no box appeared")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRestartReapsBoxesOfAKilledServer(t *testing.T) {
	s := startServer(t, nil)
	go func() {
		_, _ = s.callCtxRaw(context.Background(), map[string]any{"language": "bash", "code": "sleep 120", "timeout_seconds": 200})
	}()
	waitBox(t, "label="+sandbox.LabelOwnerPID+"="+strconv.Itoa(s.cmd.Process.Pid))
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = s.cmd.Process.Wait()
	_ = s.c.Close()
	orphans := boxes("label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(s.cmd.Process.Pid))
	if len(orphans) == 0 {
		t.Fatal("expected the killed server's box to still be there before the restart")
	}
	s2 := startServer(t, nil)
	defer s2.close()
	if left := waitNoBoxes(15*time.Second, "label="+sandbox.LabelOwnerPID+"="+strconv.Itoa(s.cmd.Process.Pid)); len(left) > 0 {
		t.Fatalf("the restarted server did not reap %v\n%s", left, s2.stderr)
	}
}

func TestEngineDownIsASandboxResult(t *testing.T) {
	s := startServer(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"})
	defer s.close()
	r, _ := s.call(t, map[string]any{"language": "python", "code": "print(1)"})
	e := wantError(t, r, contract.KindSandbox, "")
	if !strings.Contains(e.Message, "not reachable") || !strings.Contains(e.Hint, "Start the Docker engine") {
		t.Fatalf("got %+v", e)
	}
}

func TestMissingImageIsASandboxResult(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runbox.yaml")
	os.WriteFile(p, []byte(`languages:
  - name: python
    image: runbox/no-such-image:1
    file: main.py
    command: [python3, "{file}"]
    error_format: python
`), 0o644)
	s := startServer(t, nil, "--manifest", p)
	defer s.close()
	r, _ := s.call(t, map[string]any{"language": "python", "code": "print(1)"})
	e := wantError(t, r, contract.KindSandbox, "")
	if !strings.Contains(e.Message, "runbox/no-such-image:1 is missing") || !strings.Contains(e.Hint, "runbox setup") {
		t.Fatalf("got %+v", e)
	}
}

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "hello.py")
	os.WriteFile(script, []byte("import sys\nprint('hi', sys.stdin.read().strip())\nopen('out.txt','w').write('artifact')\nsys.exit(3)\n"), 0o644)
	cmd := exec.Command(runboxBin, "run", "--out", filepath.Join(dir, "out"), script)
	cmd.Stdin = strings.NewReader("there")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || string(out) != "hi there\n" {
		t.Fatalf("runbox run: %v, stdout %q", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out", "out.txt")); string(b) != "artifact" {
		t.Fatalf("artifact not written: %q", b)
	}
	runCommandDisplays(t, filepath.Join(dir, "plot"))
	cmd = exec.Command(runboxBin, "run", "--json", "--language", "javascript", "-")
	cmd.Stdin = strings.NewReader("console.log(6*7)")
	out, err = cmd.Output()
	var r contract.Result
	if err != nil || json.Unmarshal(out, &r) != nil || r.Stdout != "42\n" || r.Status != "ok" {
		t.Fatalf("runbox run --json: %v %s", err, out)
	}
}

// runCommandDisplays: `runbox run --out DIR` writes what the code
// displayed into DIR/displays, a file per representation named by index
// and kind, and names each display and its files on stderr.
func runCommandDisplays(t *testing.T, dir string) {
	script := filepath.Join(dir, "plot.py")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(script, []byte(`import matplotlib.pyplot as plt, pandas as pd
plt.figure(figsize=(4, 3), dpi=100)
plt.plot([1, 2, 3])
plt.show()
display(pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}))
print("done")
`), 0o644)
	out := filepath.Join(dir, "out")
	cmd := exec.Command(runboxBin, "run", "--out", out, script)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil || string(stdout) != "done\n" {
		t.Fatalf("runbox run --out with displays: %v, stdout %q\n%s", err, stdout, stderr.String())
	}
	f, err := os.Open(filepath.Join(out, "displays", "0-image.png"))
	if err != nil {
		t.Fatalf("the figure was not written: %v\n%s", err, stderr.String())
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() != 400 || img.Bounds().Dy() != 300 {
		t.Errorf("displays/0-image.png: %v", err)
	}
	var table contract.Table
	if b, err := os.ReadFile(filepath.Join(out, "displays", "1-table.json")); err != nil || json.Unmarshal(b, &table) != nil || !slices.Equal(table.Shape, []int64{2, 2}) {
		t.Errorf("displays/1-table.json: %v %s", err, b)
	}
	for _, line := range []string{
		"runbox: display 0 (show): image/png 400x300 in displays/0-image.png",
		"runbox: display 1 (display): application/vnd.runbox.table+json 2 rows x 2 columns in displays/1-table.json",
	} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr does not say %q:\n%s", line, stderr.String())
		}
	}
}

// callCtxRaw calls run_code without checking the outcome, for calls that
// are cancelled or whose server is killed.
func (s *server) callCtxRaw(ctx context.Context, args map[string]any) (any, error) {
	return s.c.CallTool(ctx, newCall(args))
}

// TestInitVolumeRemovedBetweenBoxes: a server of another version sharing
// the engine may prune this server's runbox-init volume between two of its
// boxes (the engine refuses only while one is mounted); the next run makes
// the volume again instead of failing.
//
// The server is a copy of this build whose runbox-init carries a trailer
// of its own, so that its volume is its alone: other servers of this
// build on the engine (other tests, a second checkout) mount the build's
// volume, and the engine would refuse to remove it.
func TestInitVolumeRemovedBetweenBoxes(t *testing.T) {
	dir := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(binDir, "runbox-init-linux-"+runtime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	bin = append(bin, []byte(t.Name()+strconv.FormatInt(time.Now().UnixNano(), 10))...)
	server, err := os.ReadFile(runboxBin)
	if err != nil {
		t.Fatal(err)
	}
	if os.WriteFile(filepath.Join(dir, "runbox-init-linux-"+runtime.GOARCH), bin, 0o755) != nil ||
		os.WriteFile(filepath.Join(dir, "runbox"), server, 0o755) != nil {
		t.Fatal("copying the binaries")
	}
	s := startServerOf(t, filepath.Join(dir, "runbox"), nil, secretEnv, "--manifest", writeManifest(t, "audit:\n  enabled: false\npool:\n  size: 0\n"))
	defer s.close()
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo one"})
	mustOK(t, r)
	sum := sha256.Sum256(bin)
	out, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "label="+sandbox.LabelInitSHA+"="+hex.EncodeToString(sum[:])).Output()
	vol := strings.TrimSpace(string(out))
	if err != nil || vol == "" || strings.Contains(vol, "\n") {
		t.Fatalf("this build's runbox-init volume: %q, %v", vol, err)
	}
	// The server made it again for the second box: removed once the
	// server is gone (its boxes with it).
	t.Cleanup(func() {
		for range 50 {
			if exec.Command("docker", "volume", "rm", vol).Run() == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	// The first box is removed after its answer: wait until the engine
	// lets the volume go.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := exec.Command("docker", "volume", "rm", vol).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker volume rm %s: %v\n%s", vol, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, _ = s.call(t, map[string]any{"language": "bash", "code": "echo two"})
	mustOK(t, r)
	if r.Stdout != "two\n" {
		t.Errorf("stdout %q", r.Stdout)
	}
}

// TestStopsWhenItsClientStopsReading: a client that holds the server's
// stdout but no longer reads it (its process wedged) blocks the server's
// writes; SIGTERM still ends the server, within its stop bound (30 s),
// and a second SIGTERM at once. Servers left by a killed bench sat in a
// futex wait through SIGTERMs until kill -9.
func TestStopsWhenItsClientStopsReading(t *testing.T) {
	for _, second := range []bool{false, true} {
		t.Run(map[bool]string{false: "one signal", true: "two signals"}[second], func(t *testing.T) {
			// No pool: a server ended at once leaves its boxes to the
			// next server's reaper, and this test runs no code.
			cmd := exec.Command(runboxBin, "serve", "--manifest", writeManifest(t, "audit:\n  enabled: false\npool:\n  size: 0\n"))
			cmd.Env = append(os.Environ(), secretEnv...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			// Held open and never read: the pipe fills and writes block.
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() { _ = cmd.Process.Kill() }()
			_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			// Answers far past a pipe's 64 KiB, written by a server whose
			// client reads none of them.
			go func() {
				for i := 1; i <= 200; i++ {
					if _, err := fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i); err != nil {
						return
					}
				}
			}()
			time.Sleep(5 * time.Second)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			bound := 60 * time.Second
			if second {
				time.Sleep(time.Second)
				_ = cmd.Process.Signal(syscall.SIGTERM)
				bound = 10 * time.Second
			}
			select {
			case <-exited:
			case <-time.After(bound):
				t.Fatalf("the server did not end within %s of SIGTERM", bound)
			}
		})
	}
}
