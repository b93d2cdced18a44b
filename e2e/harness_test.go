//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/sandbox"
)

// fakeSecret is in the server's environment; it must never reach a box.
const fakeSecret = "sk-live-51HrunboxFAKEsecretDoNotLeak"

var (
	binDir    string
	runboxBin string

	sharedOnce   sync.Once
	sharedServer *server
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	start := time.Now()
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CI") != "" {
			fmt.Println("FAIL: e2e needs Docker and CI has no docker CLI: run `make setup`")
			return 1
		}
		fmt.Println("SKIP: e2e needs Docker and there is no docker CLI on this machine (`make setup` installs it)")
		return 0
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		fmt.Printf("FAIL: the Docker engine is not answering (run `make setup`): %v\n%s\n", err, out)
		return 1
	}
	dir, err := os.MkdirTemp("", "runbox-e2e-")
	if err != nil {
		fmt.Println("FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	runboxBin = filepath.Join(dir, "runbox")
	for _, b := range [][]string{
		{"build", "-o", runboxBin, "../cmd/runbox"},
		// As the Makefile builds it, so tests share its runbox-init volume.
		{"build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "runbox-init-linux-"+runtime.GOARCH), "../cmd/runbox-init"},
	} {
		cmd := exec.Command("go", b...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Printf("FAIL: go %v: %v\n%s", b, err, out)
			return 1
		}
	}
	code := m.Run()
	if sharedServer != nil {
		sharedServer.close()
	}
	// A leak is a box whose server is gone: every server of this run is
	// closed by now. Boxes of a live server belong to another suite
	// sharing the engine and are none of ours; so are the boxes another
	// suite's test orphaned on purpose (waitNoOrphans).
	if leaked := waitNoOrphans(10*time.Second, start); len(leaked) > 0 {
		fmt.Printf("FAIL: containers left behind by the tests: %v\n", leaked)
		_ = exec.Command("docker", append([]string{"rm", "-f"}, leaked...)...).Run()
		return 1
	}
	if leaked := waitNoOCIOrphans(10*time.Second, start); len(leaked) > 0 {
		fmt.Printf("FAIL: oci boxes left behind in runc by the tests: %v\n", leaked)
		for _, id := range leaked {
			_ = exec.Command("runc", "--root", ociState, "delete", "--force", id).Run()
		}
		return 1
	}
	return code
}

// absent skips a test whose backend is not on this machine, as TestMain
// does without Docker; under CI, where every backend must be there, it
// fails.
func absent(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s, and CI must run every backend", why)
	}
	t.Skip(why)
}

// Turns of the backends that parallel tests take one at a time: a
// backend subtest of a parallel test takes its backend's turn (takeTurn)
// before its first use of it, and holds it to its end, its servers closed
// and their boxes checked gone. The test cluster's node has 2 CPUs, which
// one test's pods may take whole, so that another's would wait Pending;
// and its first use deletes the pods of dead owners, a killed server's
// among them. The Podman service, one process for every test's boxes,
// removed a box past the minute a test's clean-up waits when tests used
// it at once on a loaded machine.
var turns = map[string]chan struct{}{
	"kubernetes": make(chan struct{}, 1),
	"podman":     make(chan struct{}, 1),
}

// takeTurn holds backend's turn, if it has one, until t ends.
func takeTurn(t testing.TB, backend string) {
	t.Helper()
	turn := turns[backend]
	if turn == nil {
		return
	}
	turn <- struct{}{}
	t.Cleanup(func() { <-turn })
}

// boxes lists runbox's containers on the engine.
func boxes(filters ...string) []string {
	args := []string{"ps", "-aq", "--filter", "label=" + sandbox.LabelManaged + "=true"}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	out, _ := exec.Command("docker", args...).Output()
	return strings.Fields(string(out))
}

// waitNoOrphans waits for every box whose owner process on this host is
// gone to be removed, and returns those that were not. Only boxes this
// run could have made count: labelled with this host's name (a test that
// labels its boxes with a host of its own checks them itself) and made
// after since. Another suite sharing the engine kills servers on purpose
// too, and their boxes wait for a restarted server to adopt them.
func waitNoOrphans(d time.Duration, since time.Time) []string {
	host, _ := os.Hostname()
	deadline := time.Now().Add(d)
	for {
		var orphans []string
		out, _ := exec.Command("docker", "ps", "-a", "--filter", "label="+sandbox.LabelManaged+"=true",
			"--format", `{{.ID}} {{.Label "`+sandbox.LabelOwnerPID+`"}} {{.Label "`+sandbox.LabelOwnerHost+`"}} {{.CreatedAt}}`).Output()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.SplitN(line, " ", 4)
			if len(f) < 4 || f[2] != host {
				continue
			}
			created, err := time.Parse("2006-01-02 15:04:05 -0700 MST", f[3])
			if err == nil && created.Before(since.Add(-time.Second)) {
				continue
			}
			if n, err := strconv.Atoi(f[1]); err != nil || syscall.Kill(n, 0) == syscall.ESRCH {
				orphans = append(orphans, f[0])
			}
		}
		if len(orphans) == 0 || time.Now().After(deadline) {
			return orphans
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitNoBoxes(d time.Duration, filters ...string) []string {
	deadline := time.Now().Add(d)
	for {
		left := boxes(filters...)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// server is a running `runbox serve` with an MCP client on its stdio.
type server struct {
	c      *client.Client
	cmd    *exec.Cmd
	stderr *syncBuffer
	// host is the engine's DOCKER_HOST when not the default one.
	host string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer starts a server with extra environment and arguments.
func startServer(t testing.TB, env []string, args ...string) *server {
	t.Helper()
	return startServerOf(t, runboxBin, nil, env, args...)
}

// startServerOf starts the runbox binary bin as startServer does; wrap,
// when set, turns the command into the one that starts it (ownHost).
func startServerOf(t testing.TB, bin string, wrap func(string, ...string) (string, []string), env []string, args ...string) *server {
	t.Helper()
	s := &server{stderr: &syncBuffer{}}
	c, err := client.NewStdioMCPClientWithOptions(bin, env, append([]string{"serve"}, args...),
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			if wrap != nil {
				command, args = wrap(command, args...)
			}
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = s.stderr
			s.cmd = cmd
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("starting runbox serve: %v", err)
	}
	s.c = c
	// The constructor starts the transport but only Start installs the
	// notification handler (progress).
	if err := c.Start(context.Background()); err != nil {
		s.kill()
		t.Fatalf("start: %v", err)
	}
	if err := initialize(c); err != nil {
		s.kill()
		t.Fatalf("initialize: %v\nserver stderr:\n%s", err, s.stderr)
	}
	return s
}

// initialize is the MCP handshake of every e2e client, bounded in time.
func initialize(c *client.Client) error {
	return initializeAs(c, mcp.LATEST_PROTOCOL_VERSION)
}

// initializeAs is initialize asking for a protocol version: one before
// 2026-07-28 makes the initialize handshake, and a session.
func initializeAs(c *client.Client, version string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox-e2e", Version: "1"}
	_, err := c.Initialize(ctx, init)
	return err
}

// kill ends a server that did not come up, so that no test leaves one
// running.
func (s *server) kill() {
	_ = s.c.Close()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_, _ = s.cmd.Process.Wait()
	}
}

func (s *server) close() {
	_ = s.c.Close()
	if s.cmd != nil && s.cmd.Process != nil {
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	}
}

// shared is one server for the tests that need nothing special; it has the
// fake secret in its environment.
func shared(t testing.TB) *server {
	sharedOnce.Do(func() {
		sharedServer = startServer(t, []string{"RUNBOX_TEST_SECRET=" + fakeSecret, "AWS_SECRET_ACCESS_KEY=" + fakeSecret})
	})
	if sharedServer == nil {
		t.Fatal("shared server did not start")
	}
	return sharedServer
}

// call runs run_code and decodes the structured result.
func (s *server) call(t testing.TB, args map[string]any) (contract.Result, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return s.callCtx(ctx, t, args)
}

func (s *server) callCtx(ctx context.Context, t testing.TB, args map[string]any) (contract.Result, *mcp.CallToolResult) {
	t.Helper()
	res, err := s.c.CallTool(ctx, newCall(args))
	if err != nil {
		t.Fatalf("call: %v\nserver stderr:\n%s", err, s.stderr)
	}
	r, err := decodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError != (r.Status == contract.StatusError) {
		t.Fatalf("isError %v but status %q", res.IsError, r.Status)
	}
	return r, res
}

// run is call on the shared server with language and code.
func run(t testing.TB, language, code string, extra ...any) contract.Result {
	t.Helper()
	args := map[string]any{"language": language, "code": code}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	r, _ := shared(t).call(t, args)
	return r
}

func mustOK(t testing.TB, r contract.Result) {
	t.Helper()
	if r.Status != contract.StatusOK {
		t.Fatalf("status %s, error %+v\nstdout: %s\nstderr: %s", r.Status, r.Error, r.Stdout, r.Stderr)
	}
}

// wantError fails unless r is an error of kind and limit; the tables give
// them as contract constants or as plain strings.
func wantError[K, L ~string](t testing.TB, r contract.Result, kind K, limit L) *contract.ErrorInfo {
	t.Helper()
	if r.Status != contract.StatusError || r.Error == nil || string(r.Error.Kind) != string(kind) || string(r.Error.Limit) != string(limit) {
		t.Fatalf("want error %s/%s, got status %s error %+v\nstdout: %.2000s\nstderr: %.2000s", kind, limit, r.Status, r.Error, r.Stdout, r.Stderr)
	}
	if r.Error.Hint == "" || strings.Count(strings.TrimSpace(r.Error.Hint), "\n") > 0 {
		t.Errorf("hint must be one sentence: %q", r.Error.Hint)
	}
	return r.Error
}

// decodeResult reads run_code's structured result.
func decodeResult(res *mcp.CallToolResult) (contract.Result, error) {
	var r contract.Result
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("structured content: %v: %s", err, raw)
	}
	return r, nil
}

func newCall(args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = args
	return req
}

// described waits for run_code's description to say every one of want,
// and returns it: the server answers at once and tells what its images
// have (probed beside serving) and its upstream servers' tool counts when
// it knows them, through tools/list_changed.
func (s *server) described(t testing.TB, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		list, err := s.c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		desc := ""
		for _, tl := range list.Tools {
			if tl.Name == "run_code" {
				desc = tl.Description
			}
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(desc, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return desc
		}
		if time.Now().After(deadline) {
			t.Fatalf("run_code's description still lacks %q after 90 s:\n%s", missing, desc)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// endAtCleanup ends a server started by hand at the end of the test: its
// stdin closed, then waited for, killed if it does not end in 30 s.
func endAtCleanup(t testing.TB, cmd *exec.Cmd, in io.Closer) {
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
}

// runboxCache is the machine's cache of slow builds, as scripts/cache.sh
// names it: $RUNBOX_CACHE, else the user's cache directory's runbox.
func runboxCache() string {
	if d := os.Getenv("RUNBOX_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.Getenv("HOME"), ".cache", "runbox")
	}
	return filepath.Join(d, "runbox")
}

// structuredCall calls the tool name on c within wait and decodes its
// structuredContent into T; strict: isError must say whether the answer
// carries an error.
func structuredCall[T any](t testing.TB, c *client.Client, wait time.Duration, strict bool, name string, args map[string]any) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var a T
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: %v: %s", name, err, raw)
	}
	var probe struct {
		Error *contract.ErrorInfo `json:"error"`
	}
	if strict && json.Unmarshal(raw, &probe) == nil && res.IsError != (probe.Error != nil) {
		t.Fatalf("%s: isError %v, error %+v", name, res.IsError, probe.Error)
	}
	return a
}
