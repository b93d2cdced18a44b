//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// upstreamFake builds e2e/upstreamfake, the server that misbehaves on
// request.
func upstreamFake(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		fakeBin = filepath.Join(binDir, "upstreamfake")
		out, err := exec.Command("go", "build", "-o", fakeBin, "./upstreamfake").CombinedOutput()
		if err != nil {
			fakeErr = err
			t.Logf("%s", out)
		}
	})
	if fakeErr != nil {
		t.Fatalf("building upstreamfake: %v", fakeErr)
	}
	return fakeBin
}

// faultServers is a manifest with the fake server over stdio twice (once
// under a policy) and over streamable HTTP on 127.0.0.1.
func faultServers(t *testing.T, logPath string) string {
	t.Helper()
	bin := upstreamFake(t)
	addr := freeAddr(t)
	const token = "fake-upstream-token"
	web := exec.Command(bin, "--http", addr)
	web.Env = append(os.Environ(), "FAKE_UPSTREAM_TOKEN="+token)
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = web.Process.Kill(); _, _ = web.Process.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for !listening(addr) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Setenv("RUNBOX_TEST_FAKE_LOG", logPath)
	t.Setenv("RUNBOX_TEST_FAKE_AUTH", "Bearer "+token)
	return "servers:\n" +
		"  - name: fake\n    command: " + bin + "\n    env:\n      FAKE_UPSTREAM_LOG: RUNBOX_TEST_FAKE_LOG\n" +
		"  - name: guarded\n    command: " + bin + "\n    env:\n      FAKE_UPSTREAM_LOG: RUNBOX_TEST_FAKE_LOG\n    deny: [\"ec*\"]\n    ask: [\"secret\"]\n" +
		"  - name: web\n    url: http://" + addr + "/mcp\n    headers:\n      Authorization: RUNBOX_TEST_FAKE_AUTH\n" +
		"tool_calls:\n  max_calls: 40\n  call_timeout_seconds: 3\n"
}

func listening(addr string) bool {
	c, err := (&net.Dialer{Timeout: 200 * time.Millisecond}).Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// elicitor answers every elicitation with action.
type elicitor struct {
	action mcp.ElicitationResponseAction
	mu     sync.Mutex
	asked  []string
}

func (e *elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.asked = append(e.asked, req.Params.Message)
	e.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: e.action}}, nil
}

// startWithElicitor is startServer for a client that can be asked.
func startWithElicitor(t *testing.T, manifestPath string, h client.ElicitationHandler) *server {
	t.Helper()
	return startWithOptions(t, manifestPath, client.WithElicitationHandler(h))
}

// startWithOptions is startServer for a client with opts (a handler of
// the server's requests: elicitation, roots).
func startWithOptions(t *testing.T, manifestPath string, opts ...client.ClientOption) *server {
	t.Helper()
	s := &server{stderr: &syncBuffer{}}
	tr := transport.NewStdioWithOptions(runboxBin, nil, []string{"serve", "--manifest", manifestPath},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = s.stderr
			s.cmd = cmd
			return cmd, nil
		}))
	s.c = client.NewClient(tr, opts...)
	if err := s.c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := initialize(s.c); err != nil {
		s.kill()
		t.Fatalf("initialize: %v\n%s", err, s.stderr)
	}
	t.Cleanup(s.close)
	return s
}

func countLines(path, line string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), line+"\n")
}

// TestToolCallsFaults: upstreams that hang, crash mid-call or answer
// 10 MB, a flood of calls, deny and ask, streamable HTTP, list_changed.
func TestToolCallsFaults(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "fake.log")
	servers := faultServers(t, logPath)
	s := dockerServer(t, servers)
	py := func(t *testing.T, code string, timeout float64) string {
		t.Helper()
		r, _ := s.call(t, map[string]any{"language": "python", "code": "import runbox_tools as tools\n" + code, "timeout_seconds": timeout})
		if r.Error != nil && r.Error.Kind != "timeout" {
			t.Fatalf("error %+v\nstderr %s", r.Error, r.Stderr)
		}
		return r.Stdout
	}

	t.Run("a call that hangs times out, cancelled upstream", func(t *testing.T) {
		before := countLines(logPath, "hang cancelled")
		out := py(t, "try:\n    tools.fake.hang()\nexcept tools.ToolError as e:\n    print(e.kind)\n", 30)
		if out != "timeout\n" {
			t.Fatalf("stdout %q", out)
		}
		waitFor(t, 5*time.Second, func() bool { return countLines(logPath, "hang cancelled") > before })
	})

	t.Run("a run that times out cancels its call in flight upstream", func(t *testing.T) {
		before := countLines(logPath, "hang cancelled")
		start := time.Now()
		r, _ := s.call(t, map[string]any{"language": "javascript", "timeout_seconds": 1,
			"code": "const tools = require('runbox_tools'); tools.guarded.hang().then(() => console.log('answered'));"})
		if r.Error == nil || r.Error.Kind != "timeout" {
			t.Fatalf("result %+v", r.Error)
		}
		// Well before the 3 s call timeout would have ended it.
		waitFor(t, 2500*time.Millisecond-time.Since(start)+time.Second, func() bool { return countLines(logPath, "hang cancelled") > before })
	})

	t.Run("a server that crashes mid-call is an upstream error, and is started again", func(t *testing.T) {
		out := py(t, "p1 = tools.fake.pid()\ntry:\n    tools.fake.crash()\nexcept tools.ToolError as e:\n    print(e.kind)\np2 = tools.fake.pid()\nprint(p1 != p2)\n", 30)
		if out != "upstream\nTrue\n" {
			t.Fatalf("stdout %q", out)
		}
	})

	t.Run("10 MB from a tool reaches the code", func(t *testing.T) {
		out := py(t, "r = tools.fake.big(mb=10)\nprint(len(r), r[:3])\n", 60)
		if out != "10485760 xxx\n" {
			t.Fatalf("stdout %q", out)
		}
	})

	t.Run("a flood of calls hits the run's limit with a typed error; the server stays up", func(t *testing.T) {
		out := py(t, "ok = err = 0\nkinds = set()\nfor i in range(300):\n    try:\n        tools.fake.echo(text=str(i)); ok += 1\n    except tools.ToolError as e:\n        err += 1; kinds.add(e.kind)\nprint(ok, err, sorted(kinds))\n", 60)
		if out != "40 260 ['limit']\n" {
			t.Fatalf("stdout %q", out)
		}
		if out := py(t, "print(tools.fake.echo(text='still up'))\n", 30); out != "still up\n" {
			t.Fatalf("after the flood: %q", out)
		}
	})

	t.Run("a JavaScript flood of parallel calls is bounded too", func(t *testing.T) {
		r, _ := s.call(t, map[string]any{"language": "javascript", "timeout_seconds": 60, "code": `const tools = require('runbox_tools');
Promise.allSettled(Array.from({length: 500}, (_, i) => tools.fake.echo({text: String(i)}))).then((rs) => {
  const kinds = new Set(rs.filter((r) => r.status === 'rejected').map((r) => r.reason.kind));
  console.log(rs.filter((r) => r.status === 'fulfilled').length, [...kinds].join(','));
});`})
		if r.Stdout != "40 limit\n" {
			t.Fatalf("stdout %q stderr %s error %+v", r.Stdout, r.Stderr, r.Error)
		}
	})

	t.Run("deny, and ask with a client that cannot answer", func(t *testing.T) {
		out := py(t, "for f in (lambda: tools.guarded.echo(text='x'), lambda: tools.guarded.secret()):\n    try:\n        f()\n    except tools.ToolError as e:\n        print(e.kind, e.tool)\n", 30)
		if out != "denied echo\nrefused secret\n" {
			t.Fatalf("stdout %q", out)
		}
		if countLines(logPath, "secret called") != 0 {
			t.Fatal("a refused call reached the server")
		}
	})

	t.Run("ask with a client that answers", func(t *testing.T) {
		// secret declares no arguments, which its typed function would
		// refuse in the box: tools.call sends the ones the user is shown.
		path := writeManifest(t, "audit:\n  enabled: false\n"+servers)
		for _, c := range []struct {
			action mcp.ElicitationResponseAction
			want   string
		}{{mcp.ElicitationResponseActionAccept, "{'done': True}\n"}, {mcp.ElicitationResponseActionDecline, "refused\n"}} {
			e := &elicitor{action: c.action}
			es := startWithElicitor(t, path, e)
			r, _ := es.call(t, map[string]any{"language": "python", "code": "import runbox_tools as tools\ntry:\n    print(tools.call('guarded', 'secret', {'why': 'test'}))\nexcept tools.ToolError as e:\n    print(e.kind)\n"})
			if r.Stdout != c.want || len(e.asked) != 1 || !strings.Contains(e.asked[0], `"why": "test"`) {
				t.Fatalf("%s: stdout %q, asked %q, stderr %s", c.action, r.Stdout, e.asked, es.stderr)
			}
		}
	})

	t.Run("a streamable HTTP server with a header from a named variable", func(t *testing.T) {
		if out := py(t, "print(tools.web.echo(text='over http'))\n", 30); out != "over http\n" {
			t.Fatalf("stdout %q", out)
		}
	})

	t.Cleanup(func() {
		// Its stdio upstreams go with the server.
		s.close()
		deadline := time.Now().Add(10 * time.Second)
		for stdioFakes(fakeBin) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if n := stdioFakes(fakeBin); n > 0 {
			t.Errorf("%d stdio upstream servers outlived runbox", n)
		}
	})

	t.Run("a tool added upstream is callable after tools/list_changed", func(t *testing.T) {
		if out := py(t, "print(tools.fake.add_tool())\n", 30); out != "added\n" {
			t.Fatalf("stdout %q", out)
		}
		waitFor(t, 5*time.Second, func() bool {
			r, _ := s.call(t, map[string]any{"language": "python", "code": "import runbox_tools as tools\nprint(tools.fake.added_later())\n"})
			return r.Stdout == "late\n"
		})
	})
}

// stdioFakes counts the running upstreamfake processes started over stdio
// (the HTTP one has arguments).
func stdioFakes(bin string) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && string(b) == bin+"\x00" {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
