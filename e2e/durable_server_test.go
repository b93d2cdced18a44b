//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Long runs outlive the server, as an agent told "running" relies on: a run
// answered running (the client asks for its answer within 2 s through
// io.runbox/answer_within_seconds), its server killed with kill -9 mid-run,
// a new server on the same state directory answers run_wait running and then
// the run's full result. On every backend: Docker, gVisor, and Podman and
// Kubernetes where this machine has them.

// durableBackend is an engine a durable run is tried on.
type durableBackend struct {
	name string
	// env is the servers' environment besides the state directory.
	env []string
	// manifest selects the backend.
	manifest string
	// host is the Docker-API engine's DOCKER_HOST, "" for the default;
	// kube: the Kubernetes backend (no docker CLI to list its boxes).
	host string
	kube bool
}

func durableBackends(t *testing.T) []durableBackend {
	out := []durableBackend{{name: "docker"}}
	if rt, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output(); err == nil && strings.Contains(string(rt), `"runsc"`) {
		out = append(out, durableBackend{name: "gvisor", manifest: "isolation: gvisor\n"})
	} else {
		out = append(out, durableBackend{name: "gvisor"}) // skipped, said below
	}
	out = append(out, durableBackend{name: "podman", host: os.Getenv("RUNBOX_PODMAN_HOST")})
	out = append(out, durableBackend{name: "kubernetes", kube: true})
	out = append(out, durableBackend{name: "oci", manifest: "backend: oci\n"})
	return out
}

// ready skips a backend this machine lacks (absent: a failure under CI)
// and completes its manifest.
func (b *durableBackend) ready(t *testing.T) {
	t.Helper()
	switch {
	case b.name == "gvisor" && b.manifest == "":
		absent(t, "the Docker engine has no runsc runtime (`make setup` installs gVisor)")
	case b.name == "podman" && b.host == "":
		absent(t, "RUNBOX_PODMAN_HOST is not set (bash scripts/podman.sh prints it)")
	case b.name == "oci":
		ociReady(t)
	case b.kube:
		kubeSetup(t)
		b.manifest = strings.TrimPrefix(readFile(t, kubeManifest(t, "")), "")
	}
	if b.host != "" {
		b.env = append(b.env, "DOCKER_HOST="+b.host)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runBoxes lists the boxes of run id on b's Docker-API engine.
func (b durableBackend) runBoxes(t *testing.T, id string) []string {
	t.Helper()
	if b.kube {
		var out []string
		for _, p := range kubePods(t) {
			if p.Labels[sandbox.LabelRunID] == id {
				out = append(out, p.Name)
			}
		}
		return out
	}
	if b.name == "oci" {
		return ociRunBoxes(t, id)
	}
	args := []string{"ps", "-aq", "--filter", "label=" + sandbox.LabelRunID + "=" + id}
	if b.host != "" {
		args = append([]string{"-H", b.host}, args...)
	}
	out, _ := exec.Command("docker", args...).Output()
	return strings.Fields(string(out))
}

// ownHost is a host name of the test's own for its servers (each runs in a
// UTS namespace of its own under it), and how to run a command there. The
// engine is shared with other runbox servers (other suites, other
// builds), whose reapers remove at once a dead owner's box of their own
// host but leave another host's as long as a run may last: the killed
// server's box is then left to the restarted server, of the same name,
// whose run store keeps it (Options.Keep). Without unshare (not root) the
// servers run as they are, and another server's reaper may take the box.
func ownHost(t *testing.T) (host string, wrap func(bin string, args ...string) (string, []string)) {
	host = fmt.Sprintf("rbx-durable-%d", time.Now().UnixNano()%1e9)
	if err := exec.Command("unshare", "--uts", "true").Run(); err != nil {
		t.Logf("unshare --uts: %v: the servers run under this host's name", err)
		return "", func(bin string, args ...string) (string, []string) { return bin, args }
	}
	return host, func(bin string, args ...string) (string, []string) {
		return "unshare", append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, host, bin}, args...)
	}
}

// startHosted is startServer under wrap (ownHost).
func startHosted(t *testing.T, wrap func(string, ...string) (string, []string), env []string, args ...string) *server {
	t.Helper()
	return startServerOf(t, runboxBin, wrap, env, args...)
}

// durableEnv is a state directory of the test's own and b's environment.
func durableEnv(t *testing.T, b durableBackend) (env []string, runs string) {
	state := t.TempDir()
	return append([]string{"XDG_STATE_HOME=" + state}, append(secretEnv, b.env...)...), filepath.Join(state, "runbox", "runs")
}

// durableManifest is b's manifest for the test: runs go to the
// background after 30 s unless the client asks sooner.
func durableManifest(t *testing.T, b durableBackend) string {
	y := "limits:\n  answer_within_seconds: 30\n  max_timeout_seconds: 600\n"
	if !b.kube {
		y += "audit:\n  enabled: false\n"
	}
	return writeManifest(t, b.manifest+y+imageLanguages(t))
}

// within2 asks for the answer within 2 s.
var within2 = map[string]any{"io.runbox/answer_within_seconds": 2}

// callMeta calls a tool with _meta fields and decodes its result.
func (s *server) callMeta(t *testing.T, name string, args, meta map[string]any) contract.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v\nserver stderr:\n%s", name, err, s.stderr)
	}
	r, err := decodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitRecord waits for the run store's record kind-id to name its box
// (the job was sent), so that a kill after it finds the run again.
func waitRecord(t *testing.T, runs, kind, id string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(runs, kind+"-"+id+".json"))
		if strings.Contains(string(b), `\"box_id\"`) || strings.Contains(string(b), `"box_id"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run store has no record of %s with its box: %s", id, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill9 kills a server as kill -9 does: nothing of it runs after.
func (s *server) kill9(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = s.cmd.Process.Wait()
	_ = s.c.Close()
}

// waitResult calls run_wait until the run is no longer running.
func (s *server) waitResult(t *testing.T, id string) (contract.Result, int) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	running := 0
	for {
		r := s.callMeta(t, "run_wait", map[string]any{"run_id": id, "wait_seconds": 5}, nil)
		if r.RunID != id {
			t.Fatalf("run_wait of %s answered %s", id, r.RunID)
		}
		if r.Status != contract.StatusRunning {
			return r, running
		}
		running++
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running after 4 minutes\n%s", id, s.stderr)
		}
	}
}

// countdown prints 0..n-1, a second apart, then done.
func countdown(n int) string {
	return fmt.Sprintf("import time\nfor i in range(%d):\n    print(i, flush=True)\n    time.sleep(1)\nprint('done')", n)
}

func countdownOut(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String() + "done\n"
}

// TestDurableRunAfterKill: a one-off run and a session's long cell,
// their server killed mid-run, are found again by a new server on the
// same state directory: run_wait answers running, then the whole result;
// the session's cell keeps the session busy while it runs, and the
// session goes on after it. No box is left.
//
// Its runs wait on their programs' clocks, so it runs beside other tests,
// and its backends beside one another: each has its servers' own host
// (ownHost) and state directory, and looks only for its runs' boxes.
func TestDurableRunAfterKill(t *testing.T) {
	t.Parallel()
	for _, b := range durableBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			takeTurn(t, b.name)
			b.ready(t)
			env, runs := durableEnv(t, b)
			m := durableManifest(t, b)
			const n = 25
			_, wrap := ownHost(t)
			a := startHosted(t, wrap, env, "--manifest", m)
			// The session's box starts first: a start that takes a minute
			// (a loaded cluster) would otherwise pass while the one-off
			// run counts down, which must still run at the kill.
			sid := a.open(t, "python")
			first := a.callMeta(t, "run_code", map[string]any{"language": "python", "code": countdown(n), "timeout_seconds": 300}, within2)
			if first.Status != contract.StatusRunning {
				a.kill()
				t.Fatalf("status %s, want running: %+v", first.Status, first.Error)
			}
			cell := a.callMeta(t, "run_code", map[string]any{"language": "python", "code": "x = 41\n" + countdown(n+15), "session_id": sid, "timeout_seconds": 300}, within2)
			if cell.Status != contract.StatusRunning {
				a.kill()
				t.Fatalf("cell status %s, want running: %+v", cell.Status, cell.Error)
			}
			waitRecord(t, runs, "run", first.RunID)
			waitRecord(t, runs, "run", cell.RunID)
			killed := time.Now()
			a.kill9(t)

			bsrv := startHosted(t, wrap, env, "--manifest", m)
			t.Cleanup(func() {
				bsrv.close()
				for _, id := range []string{first.RunID, cell.RunID} {
					deadline := time.Now().Add(30 * time.Second)
					for left := b.runBoxes(t, id); len(left) > 0; left = b.runBoxes(t, id) {
						if time.Now().After(deadline) {
							t.Errorf("boxes of %s left: %v", id, left)
							break
						}
						time.Sleep(200 * time.Millisecond)
					}
				}
			})
			for _, id := range []string{first.RunID, cell.RunID} {
				if r := bsrv.callMeta(t, "run_wait", map[string]any{"run_id": id, "wait_seconds": 0}, nil); r.Status != contract.StatusRunning {
					t.Errorf("run_wait of %s after the restart: %s %+v (want running; the run was killed %v ago)", id, r.Status, r.Error, time.Since(killed))
				}
			}
			// The adopted cell keeps its session busy, and says so (it is
			// adopted from the first run_wait on).
			busy, deadline := "", time.Now().Add(20*time.Second)
			for busy != cell.RunID && time.Now().Before(deadline) {
				busy = sessionRunning(t, bsrv, sid)
				time.Sleep(200 * time.Millisecond)
			}
			if busy != cell.RunID {
				t.Errorf("session_list after the restart: the session runs %q, want the cell %s", busy, cell.RunID)
			}
			for _, c := range []struct {
				id, what string
				n        int
			}{{first.RunID, "one-off run", n}, {cell.RunID, "session cell", n + 15}} {
				res, running := bsrv.waitResult(t, c.id)
				switch {
				case res.Status != contract.StatusOK || res.ExitCode == nil || *res.ExitCode != 0:
					t.Errorf("%s: %s %+v\nstdout %q\nserver stderr:\n%s", c.what, res.Status, res.Error, res.Stdout, bsrv.stderr)
				case res.Stdout != countdownOut(c.n):
					t.Errorf("%s stdout = %q", c.what, res.Stdout)
				default:
					t.Logf("%s: result after the restart, %d run_wait answers running", c.what, running)
				}
			}
			// The session lives on in the new server, its state kept.
			if r := bsrv.in(t, sid, "python", "print(x + 1)"); r.Status != contract.StatusOK || r.Stdout != "42\n" {
				t.Fatalf("the session after its adopted cell: %s %+v %q", r.Status, r.Error, r.Stdout)
			}
			bsrv.tool(t, "session_close", map[string]any{"session_id": sid})
		})
	}
}

// TestDurableRunLost: a record whose box was removed meanwhile answers
// that the result is lost, fast, never a hang.
func TestDurableRunLost(t *testing.T) {
	b := durableBackend{name: "docker"}
	env, runs := durableEnv(t, b)
	m := durableManifest(t, b)
	a := startServer(t, env, "--manifest", m)
	first := a.callMeta(t, "run_code", map[string]any{"language": "python", "code": countdown(60), "timeout_seconds": 300}, within2)
	if first.Status != contract.StatusRunning {
		a.kill()
		t.Fatalf("status %s", first.Status)
	}
	waitRecord(t, runs, "run", first.RunID)
	a.kill9(t)
	for _, id := range b.runBoxes(t, first.RunID) {
		if out, err := exec.Command("docker", "rm", "-f", id).CombinedOutput(); err != nil {
			t.Fatalf("docker rm: %v %s", err, out)
		}
	}
	bsrv := startServer(t, env, "--manifest", m)
	t.Cleanup(bsrv.close)
	start := time.Now()
	r := bsrv.callMeta(t, "run_wait", map[string]any{"run_id": first.RunID, "wait_seconds": 30}, nil)
	took := time.Since(start)
	if r.Status != contract.StatusError || r.Error == nil || r.Error.Kind != contract.KindSandbox || !strings.Contains(r.Error.Message, "lost") {
		t.Fatalf("a run whose box is gone: %s %+v", r.Status, r.Error)
	}
	if took > 25*time.Second {
		t.Fatalf("the lost run took %v to answer", took)
	}
	t.Logf("lost answered in %v: %s", took.Round(time.Millisecond), r.Error.Message)
}

// TestDurableResultAfterKill: a long run that ended in a server killed
// before its client collected it answers, in the restarted server, the
// result it had (its record keeps the result, rendered when collected),
// and the restarted server serves its artifact and its cut stdout again.
func TestDurableResultAfterKill(t *testing.T) {
	b := durableBackend{name: "docker"}
	env, runs := durableEnv(t, b)
	m := durableManifest(t, b)
	a := startServer(t, env, "--manifest", m)
	code := "import time\ntime.sleep(4)\nopen('out.txt', 'w').write('kept after a restart')\nprint('line of output\\n' * 10000)\n"
	first := a.callMeta(t, "run_code", map[string]any{"language": "python", "code": code, "timeout_seconds": 120}, within2)
	if first.Status != contract.StatusRunning {
		a.kill()
		t.Fatalf("status %s, want running: %+v", first.Status, first.Error)
	}
	record := filepath.Join(runs, "run-"+first.RunID+".json")
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		raw, _ := os.ReadFile(record)
		if strings.Contains(string(raw), `"finished":true`) {
			break
		}
		if time.Now().After(deadline) {
			a.kill()
			t.Fatalf("the run's record was never finished: %.300s", raw)
		}
	}
	a.kill9(t)

	bsrv := startServer(t, env, "--manifest", m)
	t.Cleanup(bsrv.close)
	res := bsrv.callMeta(t, "run_wait", map[string]any{"run_id": first.RunID, "wait_seconds": 0}, nil)
	if res.Status != contract.StatusOK || len(res.Artifacts) != 1 || res.StdoutCut == nil || res.StdoutCut.URI == "" {
		t.Fatalf("after the restart: %s %+v artifacts %+v cut %+v", res.Status, res.Error, res.Artifacts, res.StdoutCut)
	}
	read := func(uri string) string {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		got, err := bsrv.c.ReadResource(context.Background(), req)
		if err != nil {
			t.Fatalf("%s after the restart: %v", uri, err)
		}
		switch c := got.Contents[0].(type) {
		case mcp.TextResourceContents:
			return c.Text
		case mcp.BlobResourceContents:
			raw, _ := base64.StdEncoding.DecodeString(c.Blob)
			return string(raw)
		}
		return ""
	}
	if got := read(res.Artifacts[0].URI); got != "kept after a restart" {
		t.Fatalf("the artifact after the restart: %q", got)
	}
	if got := read(res.StdoutCut.URI); strings.Count(got, "line of output") != 10000 {
		t.Fatalf("the whole stdout after the restart has %d lines", strings.Count(got, "line of output"))
	}
}

// TestDurableRunOutlivesAnotherStateDirsReaper: a server of this host
// with another state directory starts while a killed server's run goes on.
// The run's box is marked with the state directory that keeps its record
// (sandbox.Driver.MarkKept): the other server's reaper leaves it, as it gets ready
// and as it runs, and a server restarted on the first directory adopts the
// run. The servers run under one host name of the test's own, so that the
// reaper judges the box by its dead owner process, as on a user's machine.
// The backends run beside one another and beside other tests, each under
// its own host name.
func TestDurableRunOutlivesAnotherStateDirsReaper(t *testing.T) {
	t.Parallel()
	for _, b := range durableBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			takeTurn(t, b.name)
			b.ready(t)
			env, runs := durableEnv(t, b)
			otherEnv, _ := durableEnv(t, b)
			m := durableManifest(t, b)
			host, wrap := ownHost(t)
			if host == "" {
				t.Skip("unshare --uts is refused here: the servers would share this host's name with every other suite's")
			}
			a := startHosted(t, wrap, env, "--manifest", m)
			first := a.callMeta(t, "run_code", map[string]any{"language": "python", "code": countdown(15), "timeout_seconds": 300}, within2)
			if first.Status != contract.StatusRunning {
				a.kill()
				t.Fatalf("status %s, want running: %+v", first.Status, first.Error)
			}
			waitRecord(t, runs, "run", first.RunID)
			b.waitMarked(t, first.RunID)
			a.kill9(t)

			c := startHosted(t, wrap, otherEnv, "--manifest", m)
			t.Cleanup(c.close)
			// Its run is answered at its end, however slow the machine
			// (answer_within_seconds 0).
			if r := c.callMeta(t, "run_code", map[string]any{"language": "python", "code": "print(1)"}, map[string]any{"io.runbox/answer_within_seconds": 0}); r.Status != contract.StatusOK {
				t.Fatalf("the other server's run: %s %+v", r.Status, r.Error)
			}
			time.Sleep(2 * time.Second)
			if len(b.runBoxes(t, first.RunID)) == 0 {
				t.Fatalf("the other state directory's server reaped the run's box\n%s", c.stderr)
			}
			restarted := startHosted(t, wrap, env, "--manifest", m)
			t.Cleanup(restarted.close)
			res, _ := restarted.waitResult(t, first.RunID)
			if res.Status != contract.StatusOK || res.Stdout != countdownOut(15) {
				t.Fatalf("after the restart: %s %+v %q", res.Status, res.Error, res.Stdout)
			}
		})
	}
}

// waitMarked waits for run id's box to carry the mark of a kept run
// (sandbox.Driver.MarkKept): its name on a Docker-API engine, an annotation on
// Kubernetes.
func (b durableBackend) waitMarked(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b.kube {
			for _, p := range kubePods(t) {
				if p.Labels[sandbox.LabelRunID] == id && p.Annotations["runbox.io/"+sandbox.LabelKept] != "" {
					return
				}
			}
		} else if b.name == "oci" {
			for _, box := range ociRunBoxes(t, id) {
				if raw, err := os.ReadFile(filepath.Join(filepath.Dir(ociState), "boxes", box, "kept")); err == nil && len(raw) > 0 {
					return
				}
			}
		} else {
			args := []string{"ps", "-a", "--format", "{{.Names}}", "--filter", "label=" + sandbox.LabelRunID + "=" + id}
			if b.host != "" {
				args = append([]string{"-H", b.host}, args...)
			}
			out, _ := exec.Command("docker", args...).Output()
			if strings.HasPrefix(strings.TrimSpace(string(out)), "runbox-kept-") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s's box was not marked kept", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDurableTaskAfterKill: an MCP task's run, its server killed
// mid-run, completes in a new server on the same state directory:
// tasks/get answers working, then completed with the run's result.
// It runs beside other tests: its servers have a host name and a state
// directory of their own.
func TestDurableTaskAfterKill(t *testing.T) {
	t.Parallel()
	b := durableBackend{name: "docker"}
	env, runs := durableEnv(t, b)
	m := durableManifest(t, b)
	const n = 20
	_, wrap := ownHost(t)
	a := startRawStdio(t, wrap, env, m)
	created := a.send("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": countdown(n), "timeout_seconds": 300}})
	id := created.str("taskId")
	if created.str("resultType") != "task" || id == "" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	waitRecord(t, runs, "taskrun", id)
	time.Sleep(5 * time.Second) // mid-run: the run prints for 20 s
	a.kill9()

	bsrv := startRawStdio(t, wrap, env, m)
	if g := bsrv.send("tasks/get", map[string]any{"taskId": id}); g.str("status") != "working" {
		t.Fatalf("tasks/get after the restart: %+v %s", g.Error, g.Result)
	}
	deadline := time.Now().Add(4 * time.Minute)
	var done rawAnswer
	for {
		done = bsrv.send("tasks/get", map[string]any{"taskId": id})
		if s := done.str("status"); s != "working" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task is still working\n%s", bsrv.stderr)
		}
		time.Sleep(time.Second)
	}
	if done.str("status") != "completed" {
		t.Fatalf("task: %s\n%s", done.Result, bsrv.stderr)
	}
	var result struct {
		Structured contract.Result `json:"structuredContent"`
	}
	if err := json.Unmarshal(done.Result["result"], &result); err != nil {
		t.Fatal(err)
	}
	if result.Structured.Status != contract.StatusOK || result.Structured.Stdout != countdownOut(n) {
		t.Fatalf("the task's result: %+v", result.Structured)
	}
}

// rawStdio is a server spoken to in raw JSON-RPC lines, protocol
// 2026-07-28 with the Tasks extension, as TestTaskCancelOverStdio does.
type rawStdio struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      interface{ Write([]byte) (int, error) }
	answers chan rawAnswer
	stderr  *syncBuffer
	n       int
}

func startRawStdio(t *testing.T, wrap func(string, ...string) (string, []string), env []string, manifest string) *rawStdio {
	t.Helper()
	name, argv := wrap(runboxBin, "serve", "--manifest", manifest)
	cmd := exec.Command(name, argv...)
	cmd.Env = append(os.Environ(), env...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	r := &rawStdio{t: t, cmd: cmd, in: in, answers: make(chan rawAnswer, 8), stderr: &syncBuffer{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	endAtCleanup(t, cmd, in)
	go func() {
		dec := json.NewDecoder(out)
		for {
			var m struct {
				rawAnswer
				Method string `json:"method"`
			}
			if dec.Decode(&m) != nil {
				close(r.answers)
				return
			}
			if m.Method == "" {
				r.answers <- m.rawAnswer
			}
		}
	}()
	return r
}

func (r *rawStdio) send(method string, params map[string]any) rawAnswer {
	r.t.Helper()
	r.n++
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.n, "method": method, "params": params})
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		r.t.Fatal(err)
	}
	select {
	case a, ok := <-r.answers:
		if !ok {
			r.t.Fatalf("the server closed its output\n%s", r.stderr)
		}
		return a
	case <-time.After(2 * time.Minute):
		r.t.Fatalf("no answer to %s\n%s", method, r.stderr)
	}
	return rawAnswer{}
}

func (r *rawStdio) kill9() {
	_ = r.cmd.Process.Kill()
}

// TestTypeScriptClientDurable: the same with the reference TypeScript
// SDK client at its default 60 s request timeout (e2e/ts/durable.mjs).
// It runs beside other tests: its servers have a host name and a state
// directory of their own, and it looks only for its run's boxes.
func TestTypeScriptClientDurable(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	m := durableManifest(t, durableBackend{name: "docker"})
	host, _ := ownHost(t)
	cmd := exec.Command("node", "durable.mjs", runboxBin, m, state, "25", host)
	cmd.Dir = "ts"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts durable: ") {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	line := "ts durable: " + strings.SplitN(string(out), "ts durable: ", 2)[1]
	t.Log(strings.TrimSpace(strings.SplitN(line, "\n", 2)[0]))
	id := strings.Fields(line)[2]
	deadline := time.Now().Add(30 * time.Second)
	for left := (durableBackend{}).runBoxes(t, id); len(left) > 0; left = (durableBackend{}).runBoxes(t, id) {
		if time.Now().After(deadline) {
			t.Fatalf("boxes of %s left: %v", id, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sessionRunning is the run a session is busy with, as session_list says.
func sessionRunning(t *testing.T, s *server, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "session_list"
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Sessions []struct {
			ID      string `json:"session_id"`
			Running string `json:"running_run_id"`
		} `json:"sessions"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &a)
	for _, x := range a.Sessions {
		if x.ID == id {
			return x.Running
		}
	}
	return "(no such session)"
}

// A client that waits says so: io.runbox/answer_within_seconds 0 gets
// the run's result past the manifest's bound, as before the handle.
func TestAnswerWithinMetaWaits(t *testing.T) {
	s := startServer(t, secretEnv, "--manifest", writeManifest(t, "audit:\n  enabled: false\nlimits:\n  answer_within_seconds: 1\n"+imageLanguages(t)))
	t.Cleanup(s.close)
	code := countdown(4)
	if r := s.callMeta(t, "run_code", map[string]any{"language": "python", "code": code}, map[string]any{"io.runbox/answer_within_seconds": 0}); r.Status != contract.StatusOK || r.Stdout != countdownOut(4) {
		t.Fatalf("answer_within_seconds 0: %s %+v %q", r.Status, r.Error, r.Stdout)
	}
	r := s.callMeta(t, "run_code", map[string]any{"language": "python", "code": code}, nil)
	if r.Status != contract.StatusRunning {
		t.Fatalf("without the key: %s, want running after the manifest's 1 s", r.Status)
	}
	if res, _ := s.waitResult(t, r.RunID); res.Stdout != countdownOut(4) {
		t.Fatalf("run_wait: %+v", res)
	}
}
