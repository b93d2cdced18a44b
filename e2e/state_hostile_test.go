//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
			time.Sleep(time.Second)
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
