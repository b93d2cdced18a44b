//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// What a server reads back from its state directory is hostile input: a
// record may be tampered with, a file may be a FIFO, a link or endless.

// writeRunRecord writes, as the run store would, a running one-off run's
// record of the local user (a stdio server's) whose box is boxID.
func writeRunRecord(t *testing.T, runs, runID, boxID string) {
	t.Helper()
	det := sandbox.Detached{RunID: runID, BoxID: boxID, Isolation: manifest.IsolationRunc,
		Job: contract.Job{RunID: runID, Code: "print(1)", Timeout: 10 * time.Second}, Sent: time.Now()}
	data := map[string]any{"run_id": runID, "owner": "local", "tool": "run_code", "language": "python",
		"started": time.Now(), "call": map[string]any{"app": map[string]any{}}, "detached": det}
	raw, err := json.Marshal(map[string]any{"kind": "run", "id": runID, "finished": false, "updated": time.Now(), "data": data})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "run-"+runID+".json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTamperedRecordAdoptsOnlyItsRunsBox: a run record (tampered with, or
// simply wrong) that names a box which is not its run's is not adopted:
// run_wait answers that the run's result is lost, and the box is neither
// killed nor removed. On Docker, an unlabelled container (not runbox's);
// on Docker and the oci backend, the box of a session whose server died
// (runbox's, and another client's state).
func TestTamperedRecordAdoptsOnlyItsRunsBox(t *testing.T) {
	for _, tc := range []struct {
		name, backend string
		box           func(t *testing.T) string
	}{
		{"docker/unlabelled", "docker", func(t *testing.T) string {
			out, err := exec.Command("docker", "run", "-d", "--network", "none", "--entrypoint", "/bin/sleep",
				"--name", fmt.Sprintf("rbx-e2e-not-runbox-%d", time.Now().UnixNano()), manifest.DefaultImage, "600").Output()
			if err != nil {
				t.Fatalf("docker run: %v", err)
			}
			return strings.TrimSpace(string(out))
		}},
		{"docker/session", "docker", func(t *testing.T) string { return orphanSessionBox(t, "docker", "") }},
		{"oci/session", "oci", func(t *testing.T) string {
			ociReady(t)
			return orphanSessionBox(t, "oci", "backend: oci\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box := tc.box(t)
			t.Cleanup(func() { removeForeignBox(tc.backend, box) })
			state := t.TempDir()
			runID := fmt.Sprintf("r_TAMPERED%d", time.Now().UnixNano())
			writeRunRecord(t, filepath.Join(state, "runbox", "runs"), runID, box)
			y := "audit:\n  enabled: false\npool:\n  size: 0\nsessions:\n  enabled: true\n"
			if tc.backend == "oci" {
				y = "backend: oci\n" + y
			}
			s := startServer(t, []string{"XDG_STATE_HOME=" + state}, "--manifest", writeManifest(t, y))
			t.Cleanup(s.close)
			res, _ := s.waitResult(t, runID)
			if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, "lost") {
				t.Errorf("run_wait of the tampered record: %s %+v", res.Status, res.Error)
			}
			// A stopped server has finished every removal it began.
			s.close()
			if !boxRunning(t, tc.backend, nil, box) {
				t.Fatalf("the box the record named was killed or removed\n%s", s.stderr)
			}
			t.Logf("answered: %s", res.Error.Message)
		})
	}
}

// orphanSessionBox opens a session on a server of the backend, kills the
// server with SIGKILL and returns the session's box, which lives on
// (sessions outlive their server).
func orphanSessionBox(t *testing.T, backend, y string) string {
	t.Helper()
	a := startServer(t, []string{"XDG_STATE_HOME=" + t.TempDir()}, "--manifest",
		writeManifest(t, y+"audit:\n  enabled: false\npool:\n  size: 0\nsessions:\n  enabled: true\n"))
	a.open(t, "python")
	pid := strconv.Itoa(a.cmd.Process.Pid)
	var ids []string
	if backend == "oci" {
		ids = ociBoxes(t, pid)
	} else {
		out, _ := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label="+sandbox.LabelOwnerPID+"="+pid,
			"--filter", "label="+sandbox.LabelSession).Output()
		ids = strings.Fields(string(out))
	}
	a.kill9(t)
	if len(ids) != 1 {
		t.Fatalf("the session's boxes: %v", ids)
	}
	t.Cleanup(func() { removeForeignBox(backend, ids[0]) })
	return ids[0]
}

// removeForeignBox removes a box the test made or orphaned itself.
func removeForeignBox(backend, id string) {
	if backend == "oci" {
		_ = exec.Command("runc", "--root", ociState, "delete", "--force", id).Run()
		_ = os.RemoveAll(filepath.Join(filepath.Dir(ociState), "boxes", id))
		return
	}
	_ = exec.Command("docker", "rm", "-f", id).Run()
}

// TestRunStoreFIFONeverHangs: FIFOs named as records (the record of the
// run id asked for, and another), a link to an endless device and a link
// out of the store are skipped: run_wait answers at once that the run is
// unknown, and a run that goes to the background is kept and collected
// as ever.
func TestRunStoreFIFONeverHangs(t *testing.T) {
	state := t.TempDir()
	runs := filepath.Join(state, "runbox", "runs")
	if err := os.MkdirAll(filepath.Join(runs, "locks"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"run-r_fifo.json", "zz.json"} {
		if err := syscall.Mkfifo(filepath.Join(runs, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	// A finished record of the local user, but through a link.
	if err := os.WriteFile(outside, []byte(`{"kind":"run","id":"r_link","finished":true,"updated":"2099-01-01T00:00:00Z",`+
		`"data":{"run_id":"r_link","owner":"local","ended":"2099-01-01T00:00:00Z"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"run-r_zero.json": "/dev/zero", "run-r_link.json": outside, "locks/run-r_fifo.lock": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(runs, link)); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, []string{"XDG_STATE_HOME=" + state}, "--manifest",
		writeManifest(t, "audit:\n  enabled: false\nlimits:\n  answer_within_seconds: 30\n"))
	t.Cleanup(s.close)
	for _, id := range []string{"r_fifo", "r_zero", "r_link"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req := newCall(map[string]any{"run_id": id, "wait_seconds": 0})
		req.Params.Name = "run_wait"
		res, err := s.c.CallTool(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("run_wait of %s did not answer: %v\n%s", id, err, s.stderr)
		}
		if r, _ := decodeResult(res); r.Error == nil || r.Error.Kind != contract.KindInvalidRequest {
			t.Fatalf("run_wait of %s: %+v", id, r.Error)
		}
	}
	r := s.callMeta(t, "run_code", map[string]any{"language": "python", "code": countdown(4)}, within2)
	if r.Status != contract.StatusRunning {
		t.Fatalf("status %s %+v", r.Status, r.Error)
	}
	waitRecord(t, runs, "run", r.RunID)
	if res, _ := s.waitResult(t, r.RunID); res.Status != contract.StatusOK || res.Stdout != countdownOut(4) {
		t.Fatalf("the background run: %s %+v %q", res.Status, res.Error, res.Stdout)
	}
}
