//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// durableCode runs 20 s, then prints and leaves an artifact.
const durableCode = "import time\ntime.sleep(20)\n_ = open('out.txt', 'w').write('kept')\nprint('survived')\n"

var (
	durableOnce sync.Once
	durableBin  string
	durableErr  error
)

// buildDurable builds e2e/internal/durable beside runbox-init, where its
// drivers find it.
func buildDurable(t *testing.T) string {
	t.Helper()
	durableOnce.Do(func() {
		durableBin = filepath.Join(binDir, "durable")
		out, err := exec.Command("go", "build", "-o", durableBin, "./internal/durable").CombinedOutput()
		if err != nil {
			durableErr = err
			t.Logf("%s", out)
		}
	})
	if durableErr != nil {
		t.Fatalf("building e2e/internal/durable: %v", durableErr)
	}
	return durableBin
}

// TestRunOutlivesItsServer: a run outlives a server killed mid-run. A server
// sends a 20 s run to its box, a one-off run and a session's cell alike, and
// is killed with SIGKILL mid-run; the box runs on, and a new server process,
// given the record the first one's OnSent wrote, keeps the box from its
// reaper (whose owner is dead), adopts the run and answers its result as the
// dead server would have (output, artifact, run id); a one-off box is
// removed after, a session's cell keeps the session busy with the run
// meanwhile. A second adoption of the same record says the result is lost.
// On Docker and gVisor, Podman (where RUNBOX_PODMAN_HOST is set: the box's
// stdin ends with the killed server's attach, and the new server reaches it
// through its relay, docs/podman.md) and Kubernetes (where
// RUNBOX_K8S_KUBECONFIG is set).
//
// Both processes label their boxes with an owner host of the test's own:
// the engine is shared with other runbox servers (other suites), and any
// server judges a box of a dead owner on its own host as left over. The
// restarted server, of that same host, does too: only its Keep holds the
// box. The host is the backend's own: the backends run in parallel, and
// one's restarted server would take another's box as left over.
//
// Its runs wait on their programs' clocks, so it runs beside other tests.
func TestRunOutlivesItsServer(t *testing.T) {
	t.Parallel()
	bin := buildDurable(t)
	base := "audit:\n  enabled: false\npool:\n  size: 0\nsessions:\n  enabled: true\n"
	for _, be := range []struct {
		name  string
		setup func(t *testing.T) (manifest string, env []string)
	}{
		{"docker", func(t *testing.T) (string, []string) { return writeManifest(t, base), nil }},
		{"gvisor", func(t *testing.T) (string, []string) {
			out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
			if err != nil || !strings.Contains(string(out), `"runsc"`) {
				absent(t, "the Docker engine has no runsc runtime (`make setup` installs gVisor)")
			}
			return writeManifest(t, "isolation: gvisor\n"+base), nil
		}},
		{"podman", func(t *testing.T) (string, []string) {
			host := os.Getenv("RUNBOX_PODMAN_HOST")
			if host == "" {
				absent(t, "RUNBOX_PODMAN_HOST is not set (bash scripts/podman.sh prints it)")
			}
			return writeManifest(t, base), []string{"DOCKER_HOST=" + host}
		}},
		{"kubernetes", func(t *testing.T) (string, []string) {
			kubeSetup(t)
			return kubeManifest(t, "pool:\n  size: 0\nsessions:\n  enabled: true\n"), nil
		}},
		{"oci", func(t *testing.T) (string, []string) {
			ociReady(t)
			return writeManifest(t, "backend: oci\n"+base), nil
		}},
	} {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			takeTurn(t, be.name)
			for _, session := range []bool{false, true} {
				name := "one-off"
				if session {
					name = "cell"
				}
				t.Run(name, func(t *testing.T) {
					m, env := be.setup(t)
					durableRun(t, bin, m, env, be.name, session)
				})
			}
		})
	}
}

func durableRun(t *testing.T, bin, manifest string, env []string, backend string, session bool) {
	record := filepath.Join(t.TempDir(), "record.json")
	host := "runbox-durable-e2e-" + backend
	args := []string{"start", "-manifest", manifest, "-record", record, "-code", durableCode, "-owner-host", host}
	if session {
		args = append(args, "-session")
	}
	first := exec.Command(bin, args...)
	first.Env = append(os.Environ(), env...)
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	var rec sandbox.Detached
	t.Cleanup(func() {
		_ = first.Process.Kill()
		_ = first.Wait()
		// Nothing of the test may stay: the box, whatever became of it.
		if rec.BoxID != "" {
			removeBox(t, backend, env, rec.BoxID)
		}
	})
	for end := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(record)
		if err == nil && json.Unmarshal(b, &rec) == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the first server wrote no record:\n%s", firstErr.String())
		}
	}
	if rec.BoxID == "" || rec.Job.RunID != rec.RunID || (session && rec.Session == "") {
		t.Fatalf("record %+v", rec)
	}
	time.Sleep(3 * time.Second)
	if err := first.Process.Kill(); err != nil { // SIGKILL: no clean-up runs
		t.Fatal(err)
	}
	_ = first.Wait()
	if !boxRunning(t, backend, env, rec.BoxID) {
		t.Fatalf("the box did not outlive its server")
	}

	res, busy := adopt(t, bin, manifest, env, record, host)
	if res.Status != contract.StatusOK || res.RunID != rec.RunID || res.Stdout != "survived\n" {
		t.Fatalf("adopted: %+v %+v", res, res.Error)
	}
	t.Logf("adopted %s: %s, wall %d ms, artifacts %d", rec.RunID, res.Status, res.Metrics.WallMs, len(res.Artifacts))
	arts := []string{}
	for _, a := range res.Artifacts {
		arts = append(arts, a.Path)
	}
	if !strings.Contains(strings.Join(arts, ","), "out.txt") {
		t.Errorf("artifacts %v", arts)
	}
	if res.Metrics.WallMs < 19000 {
		t.Errorf("the run's own wall %d ms: not the box's report", res.Metrics.WallMs)
	}
	if session && !busy {
		t.Error("the session did not say it was busy with the adopted cell")
	}
	if !session {
		deadline := time.Now().Add(30 * time.Second)
		for boxExists(t, backend, env, rec.BoxID) {
			if time.Now().After(deadline) {
				t.Fatal("the adopted box was not removed")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	again, _ := adopt(t, bin, manifest, env, record, host)
	if again.Error == nil || again.Error.Kind != contract.KindSandbox || !strings.Contains(again.Error.Message, "result is lost") {
		t.Errorf("a second adoption: %+v %+v", again, again.Error)
	}
}

func adopt(t *testing.T, bin, manifest string, env []string, record, host string) (contract.Result, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "adopt", "-manifest", manifest, "-record", record, "-owner-host", host)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("adopt: %v\n%s", err, stderr.String())
	}
	var res struct {
		contract.Result
		BusySeen bool `json:"busy_seen"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("adopt's answer %q: %v", out, err)
	}
	return res.Result, res.BusySeen
}

func dockerCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("docker", args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

func boxRunning(t *testing.T, backend string, env []string, id string) bool {
	t.Helper()
	if backend == "kubernetes" {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		p, err := kubeCS.CoreV1().Pods(kubeNS).Get(ctx, id, metav1.GetOptions{})
		return err == nil && p.Status.Phase == "Running"
	}
	if backend == "oci" {
		return ociStatus(t, id) == "running"
	}
	out, _ := dockerCmd(env, "ps", "-q", "--no-trunc", "--filter", "id="+id).Output()
	return strings.TrimSpace(string(out)) != ""
}

func boxExists(t *testing.T, backend string, env []string, id string) bool {
	t.Helper()
	if backend == "kubernetes" {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		p, err := kubeCS.CoreV1().Pods(kubeNS).Get(ctx, id, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp == nil
	}
	if backend == "oci" {
		return ociStatus(t, id) != ""
	}
	out, _ := dockerCmd(env, "ps", "-aq", "--no-trunc", "--filter", "id="+id).Output()
	return strings.TrimSpace(string(out)) != ""
}

func removeBox(t *testing.T, backend string, env []string, id string) {
	t.Helper()
	if backend == "kubernetes" {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		zero := int64(0)
		_ = kubeCS.CoreV1().Pods(kubeNS).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		return
	}
	if backend == "oci" {
		_ = exec.Command("runc", "--root", ociState, "delete", "--force", id).Run()
		return
	}
	_ = dockerCmd(env, "rm", "-f", id).Run()
}
