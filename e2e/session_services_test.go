//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// A session's box serves the code's tool calls as a one-off box does:
// the same library, over the channel of the call that runs, state kept
// between calls.
func TestSessionToolCalls(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}} {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			dir, _ = filepath.EvalSymlinks(dir)
			sessionToolCalls(t, b.start(t, toolServers(t, dir)), dir)
		})
	}
}

func sessionToolCalls(t *testing.T, s *server, dir string) {
	t.Run("python", func(t *testing.T) {
		id := s.open(t, "python")
		defer s.tool(t, "session_close", map[string]any{"session_id": id})
		r := s.in(t, id, "python", `import runbox_tools as tools
first = tools.everything.get_sum(a=20, b=22)
tools.memory.create_entities(entities=[{"name": "sess", "entityType": "x", "observations": [str(first)]}])
`, "timeout_seconds", 60)
		mustOK(t, r)
		r = s.in(t, id, "python", `second = tools.everything.get_sum(a=1, b=1)
graph = tools.memory.read_graph()
tools.fs.write_file(path="`+dir+`/session.txt", content="%s|%s" % (first, second))
print("42" in str(first), "2" in str(second), "sess" in str(graph))
`, "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "True True True\n" || r.Session == nil || r.Session.Call != 2 {
			t.Fatalf("second call: %q %q %+v", r.Stdout, r.Stderr, r.Session)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "session.txt")); err != nil || !strings.Contains(string(b), "42") {
			t.Fatalf("the file on the host: %q %v", b, err)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		id := s.open(t, "javascript")
		defer s.tool(t, "session_close", map[string]any{"session_id": id})
		mustOK(t, s.in(t, id, "javascript", "const tools = require('runbox_tools')\nglobalThis.first = await tools.everything.get_sum({a: 1, b: 2})\n", "timeout_seconds", 60))
		r := s.in(t, id, "javascript", `const echoed = await tools.everything.echo({message: 'again'})
let denied = ''
try { await tools.everything.no_such_tool({}) } catch (e) { denied = e.name + ':' + e.kind }
console.log(JSON.stringify(first).includes('3'), String(echoed).includes('again'), denied)
`, "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "true true ToolError:unknown_tool\n" {
			t.Fatalf("second call: %q %q", r.Stdout, r.Stderr)
		}
	})

	// A thread the first cell leaves running calls a tool over and over:
	// while a call runs it is served, between calls it is refused (the
	// library says unavailable), and the server neither hangs nor serves
	// it with a finished call's handlers. A call still waiting for its
	// answer when a cell ends is abandoned (upstream: "the host ended the
	// call"); on a loaded machine, where calls are slow, one often is.
	t.Run("a thread left running is served only while a call runs", func(t *testing.T) {
		id := s.open(t, "python")
		defer s.tool(t, "session_close", map[string]any{"session_id": id})
		mustOK(t, s.in(t, id, "python", `import threading, time
import runbox_tools as tools
seen = []
def loop():
    while True:
        try:
            tools.everything.get_sum(a=1, b=2)
            seen.append("ok")
        except tools.ToolError as e:
            seen.append(e.kind)
        time.sleep(0.1)
threading.Thread(target=loop, daemon=True).start()
time.sleep(1)
`, "timeout_seconds", 60))
		time.Sleep(2 * time.Second)
		r := s.in(t, id, "python", "import time\nn = len(seen)\ntime.sleep(1)\nprint(sorted(set(seen) - {'upstream'}), set(seen) <= {'ok', 'unavailable', 'upstream'}, len(seen) > n, seen[-1])\n", "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "['ok', 'unavailable'] True True ok\n" {
			t.Fatalf("the thread saw %q %q", r.Stdout, r.Stderr)
		}
	})
	// Each subtest closes its session in a defer, a failed one too: what
	// is left here is a closed session's box.
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("closed sessions left boxes: %v", left)
	}
}

// The tool-call policy is per call in a session too: each call has its
// own max_calls; a cancelled call's tool call in flight is cancelled
// upstream, and the session lives on.
func TestSessionToolCallLimits(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "fake.log")
	s := dockerServer(t, faultServers(t, logPath))
	id := s.open(t, "python")
	flood := "ok = err = 0\nkinds = set()\nfor i in range(300):\n    try:\n        tools.fake.echo(text=str(i)); ok += 1\n    except tools.ToolError as e:\n        err += 1; kinds.add(e.kind)\nprint(ok, err, sorted(kinds))\n"
	for i := range 2 {
		r := s.in(t, id, "python", "import runbox_tools as tools\n"+flood, "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "40 260 ['limit']\n" {
			t.Fatalf("flood %d: %q %q", i+1, r.Stdout, r.Stderr)
		}
	}

	before := countLines(logPath, "hang cancelled")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.c.CallTool(ctx, newCall(map[string]any{"language": "python", "code": "kept = 1\ntools.fake.hang()\n", "session_id": id, "timeout_seconds": 60})); err == nil {
		t.Fatal("the cancelled call answered")
	}
	waitFor(t, 10*time.Second, func() bool { return countLines(logPath, "hang cancelled") > before })
	r := s.in(t, id, "python", "print(kept, tools.fake.echo(text='after'))", "timeout_seconds", 30)
	if mustOK(t, r); r.Stdout != "1 after\n" {
		t.Fatalf("after the cancellation: %q %q", r.Stdout, r.Stderr)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})
}

// A session's box reaches the declared endpoints through runbox-init's
// proxy and is refused the others, each call with its connections in its
// result, as a one-off run.
func TestSessionNetwork(t *testing.T) {
	ns := startNetServers(t)
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}} {
		t.Run(b.name, func(t *testing.T) { sessionNetwork(t, b.start(t, ns.manifest("")), ns) })
	}
}

func sessionNetwork(t *testing.T, s *server, ns *netServers) {
	t.Run("python", func(t *testing.T) {
		id := s.open(t, "python")
		defer s.tool(t, "session_close", map[string]any{"session_id": id})
		r := s.in(t, id, "python", fmt.Sprintf(`import os, urllib.request
os.environ["SSL_CERT_FILE"] = os.path.abspath("ca.pem")
def get(path):
    return urllib.request.urlopen("https://127.0.0.1:%d" + path, timeout=10).read().decode()
print(get("/one"))
`, ns.tport), "files", ns.files(), "timeout_seconds", 30)
		if mustOK(t, r); r.Stdout != "GET /one \n" {
			t.Fatalf("first call: %q %q", r.Stdout, r.Stderr)
		}
		checkAllowed(t, r, 1)
		r = s.in(t, id, "python", `print(get("/two"))`, "timeout_seconds", 30)
		if mustOK(t, r); r.Stdout != "GET /two \n" {
			t.Fatalf("second call: %q %q", r.Stdout, r.Stderr)
		}
		checkAllowed(t, r, 1)
		r = s.in(t, id, "python", "urllib.request.urlopen(\"https://undeclared.example/\", timeout=10)\n", "timeout_seconds", 30)
		info := wantError(t, r, contract.KindForbiddenNetwork, "")
		if !strings.Contains(info.Message, "undeclared.example:443") || len(r.Network) != 1 || r.Network[0].Allowed || r.Session.State != contract.SessionAlive {
			t.Fatalf("refused: %+v %+v %+v", info, r.Network, r.Session)
		}
		// The refusal lost nothing: the next call still has get().
		r = s.in(t, id, "python", `print(get("/three"))`, "timeout_seconds", 30)
		if mustOK(t, r); r.Stdout != "GET /three \n" {
			t.Fatalf("after the refusal: %q %q", r.Stdout, r.Stderr)
		}
		// A call that makes no connection has none in its result.
		if r := s.in(t, id, "python", "print(1)"); len(r.Network) != 0 {
			t.Fatalf("a call without connections: %+v", r.Network)
		}
	})

	t.Run("javascript", func(t *testing.T) {
		id := s.open(t, "javascript")
		defer s.tool(t, "session_close", map[string]any{"session_id": id})
		r := s.in(t, id, "javascript", fmt.Sprintf("const base = 'http://127.0.0.1:%d'\nconsole.log(await (await fetch(base + '/get')).text())\n", ns.pport), "timeout_seconds", 30)
		if mustOK(t, r); r.Stdout != "GET /get \n" {
			t.Fatalf("first call: %q %q", r.Stdout, r.Stderr)
		}
		checkAllowed(t, r, 1)
		r = s.in(t, id, "javascript", "console.log(await (await fetch(base + '/post', {method: 'POST', body: 'again'})).text())\nawait fetch('https://undeclared.example/').then(() => console.log('reached'), e => console.log(e.cause.message))\n", "timeout_seconds", 30)
		mustOK(t, r)
		if !strings.HasPrefix(r.Stdout, "POST /post again\nrunbox proxy refused undeclared.example:443") || len(r.Network) != 2 || !r.Network[0].Allowed || r.Network[1].Allowed {
			t.Fatalf("second call: %q %q %+v", r.Stdout, r.Stderr, r.Network)
		}
	})
	// Each subtest closes its session in a defer, a failed one too: what
	// is left here is a closed session's box.
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("closed sessions left boxes: %v", left)
	}
}

// approve: ask in a session: each call that may use the endpoint asks the
// user first, as a one-off run does; a client that cannot ask is refused.
func TestSessionNetworkApprove(t *testing.T) {
	ns := startNetServers(t)
	m := writeManifest(t, fmt.Sprintf("audit:\n  enabled: false\nnetwork:\n  allow:\n    - host: 127.0.0.1\n      ports: [%d]\n      approve: ask\n", ns.pport))
	get := fmt.Sprintf("print(urllib.request.urlopen(\"http://127.0.0.1:%d/x\", timeout=30).read().decode())\n", ns.pport)

	yes := &endpointApprover{allow: true}
	s := startWithElicitor(t, m, yes)
	t.Cleanup(s.close)
	id := s.open(t, "python")
	for i := range 2 {
		r := s.in(t, id, "python", "import urllib.request\n"+get, "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "GET /x \n" || yes.asked.Load() != int64(i+1) {
			t.Fatalf("call %d: %q, asked %d", i+1, r.Stdout, yes.asked.Load())
		}
	}

	// The harness's usual client declares no elicitation.
	other := startServer(t, secretEnv, "--manifest", m)
	id = other.open(t, "python")
	r := other.in(t, id, "python", "import urllib.request\n"+get, "timeout_seconds", 60)
	info := wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, "needs the user's approval and the client cannot ask for it") || r.Session.State != contract.SessionAlive {
		t.Fatalf("error %+v, session %+v", info, r.Session)
	}
}

// A server killed with SIGKILL leaves its session's box; the server that
// adopts it opens a new channel, and the box's services work over it.
func TestSessionServicesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	ns := startNetServers(t)
	manifest := writeManifest(t, "audit:\n  enabled: false\n"+toolServers(t, dir)+ns.manifest(""))
	a := startServer(t, secretEnv, "--manifest", manifest)
	id := a.open(t, "python")
	r := a.in(t, id, "python", fmt.Sprintf(`import urllib.request
import runbox_tools as tools
def both():
    n = tools.everything.get_sum(a=40, b=2)
    body = urllib.request.urlopen("http://127.0.0.1:%d/x", timeout=10).read().decode()
    return "42" in str(n), body
print(both())
`, ns.pport), "timeout_seconds", 60)
	if mustOK(t, r); r.Stdout != "(True, 'GET /x ')\n" {
		t.Fatalf("before the restart: %q %q", r.Stdout, r.Stderr)
	}
	_ = a.cmd.Process.Kill()
	_, _ = a.cmd.Process.Wait()
	_ = a.c.Close()

	b := startServer(t, secretEnv, "--manifest", manifest)
	defer b.close()
	for i := range 2 {
		r = b.in(t, id, "python", "print(both())", "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "(True, 'GET /x ')\n" || len(r.Network) != 1 || r.Session.Call != 2+i {
			t.Fatalf("after the restart, call %d: %q %q %+v\n%s", i, r.Stdout, r.Stderr, r.Network, b.stderr)
		}
	}
	if a := b.tool(t, "session_close", map[string]any{"session_id": id}); !a.Closed {
		t.Fatalf("close: %+v", a.Error)
	}
	if left := a.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("boxes left: %v", left)
	}
}

// A session's call is on the record as a one-off run is: its tool calls
// and connections in its audit line, with the session's key.
func TestSessionServicesAudit(t *testing.T) {
	ns := startNetServers(t)
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startServer(t, secretEnv, "--manifest", writeManifest(t, fmt.Sprintf("audit:\n  enabled: true\n  path: %s\n", logPath)+
		"servers:\n  - name: everything\n    command: "+npmBin(t, "mcp-server-everything")+"\n"+ns.manifest("")))
	t.Cleanup(s.close)
	id := s.open(t, "python")
	mustOK(t, s.in(t, id, "python", "import runbox_tools as tools\nimport urllib.request\n", "timeout_seconds", 60))
	r := s.in(t, id, "python", fmt.Sprintf(`tools.everything.echo(message="audited")
print(urllib.request.urlopen("http://127.0.0.1:%d/a", timeout=10).read().decode())
urllib.request.urlopen("http://undeclared.example/", timeout=10)
`, ns.pport), "timeout_seconds", 60)
	wantError(t, r, contract.KindForbiddenNetwork, "")
	e := auditEntry(t, logPath, r.RunID)
	if e.Session == nil || e.Session.Key != sandbox.SessionKey(id) || e.Session.Call != 2 || len(e.ToolCalls) != 1 || e.ToolCalls[0].Tool != "echo" ||
		len(e.Network) != 2 || !e.Network[0].Allowed || e.Network[1].Allowed || e.Network[1].Host != "undeclared.example" {
		t.Fatalf("audit entry: session %+v, tool calls %+v, network %+v", e.Session, e.ToolCalls, e.Network)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})
}

// On Kubernetes a session pod serves the same, through either of two
// instances sharing the namespace (each call's instance attaches and
// resets the channel).
func TestKubeSessionServices(t *testing.T) {
	ns := startNetServers(t)
	extra := toolServers(t, t.TempDir()) + ns.manifest("")
	a := kubeServer(t, extra)
	b := kubeServer(t, extra)
	id := a.open(t, "python")
	mustOK(t, a.in(t, id, "python", fmt.Sprintf(`import urllib.request
import runbox_tools as tools
def both():
    n = tools.everything.get_sum(a=40, b=2)
    body = urllib.request.urlopen("http://127.0.0.1:%d/k", timeout=10).read().decode()
    return "42" in str(n), body
`, ns.pport), "timeout_seconds", 60))
	for i, s := range []*server{b, a} {
		r := s.in(t, id, "python", "print(both())", "timeout_seconds", 60)
		if mustOK(t, r); r.Stdout != "(True, 'GET /k ')\n" || len(r.Network) != 1 || r.Session.Call != 2+i {
			t.Fatalf("call %d: %q %q %+v\n%s", 2+i, r.Stdout, r.Stderr, r.Network, s.stderr)
		}
	}
	if c := a.tool(t, "session_close", map[string]any{"session_id": id}); !c.Closed {
		t.Fatalf("close: %+v", c.Error)
	}
}
