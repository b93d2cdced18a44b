//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/runbox-mcp/runbox/contract"
)

// ckAnswer is the structured answer of the checkpoint tools.
type ckAnswer struct {
	Status     string `json:"status"`
	Checkpoint *struct {
		ID    string `json:"checkpoint_id"`
		Keeps string `json:"keeps"`
		Cells int    `json:"cells"`
		Bytes int64  `json:"size_bytes"`
	} `json:"checkpoint"`
	Restored *struct {
		Session struct {
			ID string `json:"session_id"`
		} `json:"session"`
		Restored string `json:"restored"`
		Replayed int    `json:"cells_replayed"`
		Failed   []struct {
			Cell  int                 `json:"cell"`
			Error *contract.ErrorInfo `json:"error"`
		} `json:"cells_failed"`
	} `json:"restored"`
	Error *contract.ErrorInfo `json:"error"`
}

func ckTool(t testing.TB, c *client.Client, name string, args map[string]any) ckAnswer {
	t.Helper()
	return structuredCall[ckAnswer](t, c, 3*time.Minute, true, name, args)
}

func (s *server) checkpoint(t testing.TB, id string) string {
	t.Helper()
	a := ckTool(t, s.c, "session_checkpoint", map[string]any{"session_id": id})
	if a.Error != nil || a.Checkpoint == nil {
		t.Fatalf("session_checkpoint: %+v\n%s", a.Error, s.stderr)
	}
	return a.Checkpoint.ID
}

// restored calls session_restore or session_fork and wants a session
// restored as want says (memory or replayed).
func (s *server) restored(t testing.TB, tool, key, id, want string) string {
	t.Helper()
	a := ckTool(t, s.c, tool, map[string]any{key: id})
	if a.Error != nil || a.Restored == nil {
		t.Fatalf("%s: %+v\n%s", tool, a.Error, s.stderr)
	}
	if a.Restored.Restored != want {
		t.Fatalf("%s: restored %q, want %q", tool, a.Restored.Restored, want)
	}
	return a.Restored.Session.ID
}

// out runs code in session id and returns its stdout, trimmed.
func (s *server) out(t testing.TB, id, lang, code string) string {
	t.Helper()
	r := s.in(t, id, lang, code)
	if r.Status != contract.StatusOK {
		t.Fatalf("in %s: %+v\nstdout %q stderr %q", id, r.Error, r.Stdout, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

// runscState is where the oci backend keeps runsc's state.
const runscState = "/run/runbox/oci/runsc"

// gvisorOCIServer starts a server on the oci backend under gVisor with a
// state directory of its own (state), and at the end checks that runsc
// knows no box of it.
func gvisorOCIServer(t *testing.T, state, extra string) *server {
	t.Helper()
	ociReady(t)
	if _, err := exec.LookPath("runsc"); err != nil {
		absent(t, "gVisor on the oci backend needs runsc (`make setup` installs it)")
	}
	s := startServer(t, append([]string{"XDG_STATE_HOME=" + state}, secretEnv...), "--manifest",
		writeManifest(t, "audit:\n  enabled: false\nbackend: oci\nisolation: gvisor\n"+extra+imageLanguages(t)))
	t.Cleanup(func() { s.close() })
	return s
}

// runscBoxes lists the boxes runsc knows in runbox's root.
func runscBoxes(t *testing.T) []string {
	out, _ := exec.Command("runsc", "--root", runscState, "list", "-quiet").Output()
	return strings.Fields(string(out))
}

// hardening is what a box shows of its isolation: identity,
// capabilities, seccomp, network interfaces, a read-only root, limits.
const hardening = `import os
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
try:
    open("/usr/x", "w"); ro = "root writable"
except OSError as e:
    ro = "root read-only"
import resource
print(os.getuid(), os.getgid(), st["CapEff"].strip(), st["CapBnd"].strip(), st.get("NoNewPrivs", "?").strip(), st.get("Seccomp", "?").strip(),
      sorted(os.listdir("/sys/class/net")), ro, resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_CORE),
      open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip() if os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") else "-")
`

// TestCheckpointGVisorMemory: on gVisor (oci backend, runsc) a Python
// session holding a random token, a numpy array, an open file and a
// working directory is checkpointed and forked twice; the forks and the
// original diverge independently, a restore gets the state of the
// checkpoint, after kill -9 and a restart too; each restored and forked
// box shows the hardening of a new one; a changed image is refused.
func TestCheckpointGVisorMemory(t *testing.T) {
	state := t.TempDir()
	s := gvisorOCIServer(t, state, "checkpoints:\n  max_per_client: 2\nsessions:\n  max_per_client: 8\n")
	id := s.open(t, "python")
	tok := s.out(t, id, "python", `import numpy as np, secrets, os
tok = secrets.token_hex(16)
arr = np.arange(1000) * 3
f = open("/workspace/log.txt", "w")
f.write("a")
os.makedirs("/workspace/sub", exist_ok=True)
os.chdir("/workspace/sub")
print(tok)`)
	ck := ckTool(t, s.c, "session_checkpoint", map[string]any{"session_id": id})
	if ck.Error != nil || ck.Checkpoint.Keeps != "memory" {
		t.Fatalf("checkpoint: %+v %+v\n%s", ck.Error, ck.Checkpoint, s.stderr)
	}
	state1 := tok + " 1498500 /workspace/sub"
	if got := s.out(t, id, "python", `f.write("b"); print(tok, int(arr.sum()), os.getcwd())`); got != state1 {
		t.Fatalf("the original after its checkpoint: %q, want %q", got, state1)
	}
	f1 := s.restored(t, "session_fork", "session_id", id, "memory")
	f2 := s.restored(t, "session_fork", "session_id", id, "memory")
	diverge := func(sid, op, mark string) string {
		return s.out(t, sid, "python", "arr "+op+"= 1\nf.write(\""+mark+"\"); f.flush()\nprint(tok, int(arr.sum()), os.getcwd(), open(\"/workspace/log.txt\").read())")
	}
	if got, want := diverge(f1, "+", "1"), tok+" 1499500 /workspace/sub ab1"; got != want {
		t.Errorf("fork 1: %q, want %q", got, want)
	}
	if got, want := diverge(f2, "-", "2"), tok+" 1497500 /workspace/sub ab2"; got != want {
		t.Errorf("fork 2: %q, want %q", got, want)
	}
	if got, want := diverge(id, "*", "0"), tok+" 1498500 /workspace/sub ab0"; got != want {
		t.Errorf("the original after its forks: %q, want %q", got, want)
	}
	r := s.restored(t, "session_restore", "checkpoint_id", ck.Checkpoint.ID, "memory")
	if got, want := diverge(r, "+", "r"), tok+" 1499500 /workspace/sub ar"; got != want {
		t.Errorf("restored: %q, want %q", got, want)
	}

	// The hardening probe: a restored and a forked box show what a new
	// one shows.
	fresh := s.open(t, "python")
	want := s.out(t, fresh, "python", hardening)
	for name, sid := range map[string]string{"restored": r, "forked": f1} {
		if got := s.out(t, sid, "python", hardening); got != want {
			t.Errorf("the %s box's hardening:\n%s\nwant a new box's:\n%s", name, got, want)
		}
	}
	if !strings.Contains(want, "root read-only") || strings.HasPrefix(want, "0 ") || !strings.Contains(want, "0000000000000000 0000000000000000") {
		t.Errorf("a new box's hardening is not as wanted: %s", want)
	}

	// Caps: a second checkpoint is kept, a third refused.
	ck2 := s.checkpoint(t, f2)
	if a := ckTool(t, s.c, "session_checkpoint", map[string]any{"session_id": f2}); a.Error == nil || a.Error.Kind != contract.KindResourceLimit || a.Error.Limit != contract.LimitCheckpoints {
		t.Fatalf("a third checkpoint past max_per_client 2: %+v", a.Error)
	}

	// kill -9, a new server on the same state directory: the checkpoint
	// restores. (The sessions are closed first: a killed server's
	// sessions live on in their boxes, by design.)
	for _, sid := range []string{id, f1, f2, r, fresh} {
		s.tool(t, "session_close", map[string]any{"session_id": sid})
	}
	waitBundlesGone(t, s)
	s.kill9(t)
	s2 := gvisorOCIServer(t, state, "checkpoints:\n  max_per_client: 2\nsessions:\n  max_per_client: 8\n")
	r2 := s2.restored(t, "session_restore", "checkpoint_id", ck.Checkpoint.ID, "memory")
	if got := s2.out(t, r2, "python", `print(tok, int(arr.sum()), os.getcwd())`); got != state1 {
		t.Errorf("restored after kill -9: %q, want %q", got, state1)
	}
	s2.tool(t, "session_close", map[string]any{"session_id": r2})

	// A changed image is refused, never run; so is a changed record.
	imgs, _ := filepath.Glob(filepath.Join(state, "runbox", "checkpoints", "*", "image", "*"))
	var recs []string
	for _, img := range imgs {
		raw, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(img)), "record.json"))
		recs = append(recs, string(raw))
	}
	if len(imgs) == 0 {
		t.Fatal("no checkpoint image in the state directory")
	}
	for _, img := range imgs {
		fh, err := os.OpenFile(img, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		_, _ = fh.ReadAt(b, 100)
		b[0] ^= 0xff
		_, _ = fh.WriteAt(b, 100)
		fh.Close()
	}
	for _, c := range []string{ck.Checkpoint.ID, ck2} {
		if a := ckTool(t, s2.c, "session_restore", map[string]any{"checkpoint_id": c}); a.Error == nil || a.Error.Kind != contract.KindCheckpointInvalid {
			t.Errorf("a tampered checkpoint: %+v", a.Error)
		}
	}
	if a := ckTool(t, s2.c, "session_restore", map[string]any{"checkpoint_id": "c_nosuchcheckpoint000000000000000000000"}); a.Error == nil || a.Error.Kind != contract.KindCheckpointNotFound {
		t.Errorf("an unknown checkpoint: %+v", a.Error)
	}
	s2.close()
	deadline := time.Now().Add(30 * time.Second)
	for len(runscBoxes(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := runscBoxes(t); len(left) > 0 {
		t.Errorf("boxes left in runsc: %v", left)
	}
	for _, srv := range []*server{s, s2} {
		if strings.Contains(srv.stderr.String(), "removing box failed") {
			t.Errorf("a box was not removed at once:\n%s", srv.stderr)
		}
	}
}

// TestCheckpointGVisorJavaScript: a JavaScript session's declarations
// and globals come back in a fork, memory and all.
func TestCheckpointGVisorJavaScript(t *testing.T) {
	s := gvisorOCIServer(t, t.TempDir(), "")
	id := s.open(t, "javascript")
	s.out(t, id, "javascript", `let x = 41; globalThis.y = "why"; const fs = require("fs"); process.chdir("/tmp"); fs.writeFileSync("/workspace/j.txt", "J")`)
	f := s.restored(t, "session_fork", "session_id", id, "memory")
	if got := s.out(t, f, "javascript", `x += 1; console.log(x, y, process.cwd(), fs.readFileSync("/workspace/j.txt", "utf8"))`); got != "42 why /tmp J" {
		t.Errorf("fork: %q", got)
	}
	if got := s.out(t, id, "javascript", `console.log(x)`); got != "41" {
		t.Errorf("the original: %q", got)
	}
}

// TestCheckpointReplayRunc: where the runtime keeps no memory (runc on
// the Docker engine) a restore and a fork replay the session's cells in
// a new session and say so, with the cells that failed; another caller's
// checkpoint is refused over HTTP.
func TestCheckpointReplayRunc(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	s, alice, bob := aliceAndBob(t)
	ca, cb := tokenClient(t, s, alice), tokenClient(t, s, bob)
	id := toolOn(t, ca, "session_open", map[string]any{"language": "python"}).Session.ID
	for _, code := range []string{"import os, numpy as np\narr = np.arange(10)", "1/0", "os.chdir('/tmp'); arr = arr * 2"} {
		callOn(t, ca, map[string]any{"language": "python", "code": code, "session_id": id})
	}
	ck := ckTool(t, ca, "session_checkpoint", map[string]any{"session_id": id})
	if ck.Error != nil || ck.Checkpoint.Keeps != "cells" || ck.Checkpoint.Cells != 3 {
		t.Fatalf("checkpoint: %+v %+v", ck.Error, ck.Checkpoint)
	}
	if a := ckTool(t, cb, "session_restore", map[string]any{"checkpoint_id": ck.Checkpoint.ID}); a.Error == nil || a.Error.Kind != contract.KindCheckpointNotFound {
		t.Fatalf("bob restored alice's checkpoint: %+v", a)
	}
	if a := ckTool(t, cb, "session_fork", map[string]any{"session_id": id}); a.Error == nil || a.Error.Kind != contract.KindSessionNotFound {
		t.Fatalf("bob forked alice's session: %+v", a)
	}
	for _, tool := range []string{"session_restore", "session_fork"} {
		args := map[string]any{"checkpoint_id": ck.Checkpoint.ID}
		if tool == "session_fork" {
			args = map[string]any{"session_id": id}
		}
		a := ckTool(t, ca, tool, args)
		if a.Error != nil || a.Restored.Restored != "replayed" || a.Restored.Replayed != 3 || len(a.Restored.Failed) != 1 ||
			a.Restored.Failed[0].Cell != 2 || a.Restored.Failed[0].Error.Type != "ZeroDivisionError" {
			t.Fatalf("%s: %+v %+v", tool, a.Error, a.Restored)
		}
		r := callOn(t, ca, map[string]any{"language": "python", "code": "print(int(arr.sum()), os.getcwd())", "session_id": a.Restored.Session.ID})
		if strings.TrimSpace(r.Stdout) != "90 /tmp" {
			t.Errorf("%s: %+v %q", tool, r.Error, r.Stdout)
		}
		toolOn(t, ca, "session_close", map[string]any{"session_id": a.Restored.Session.ID})
	}
	toolOn(t, ca, "session_close", map[string]any{"session_id": id})
}

// waitBundlesGone waits for the oci backend's bundles of server s's boxes
// to be removed (a removal runs after the close that asked for it).
func waitBundlesGone(t *testing.T, s *server) {
	t.Helper()
	pid := `"io.runbox.owner.pid":"` + strconv.Itoa(s.cmd.Process.Pid) + `"`
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := 0
		dirs, _ := filepath.Glob("/run/runbox/oci/boxes/runbox-*")
		for _, d := range dirs {
			if raw, _ := os.ReadFile(filepath.Join(d, "config.json")); strings.Contains(string(raw), pid) {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d bundles of the server's boxes left", left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
