//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// sessionAnswer is the structured answer of the session tools.
type sessionAnswer struct {
	Status  string `json:"status"`
	Session *struct {
		ID       string `json:"session_id"`
		Language string `json:"language"`
		Calls    int    `json:"calls"`
	} `json:"session"`
	Sessions []struct {
		ID    string `json:"session_id"`
		Calls int    `json:"calls"`
	} `json:"sessions"`
	Closed bool                `json:"closed"`
	Error  *contract.ErrorInfo `json:"error"`
}

func (s *server) tool(t testing.TB, name string, args map[string]any) sessionAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v\nserver stderr:\n%s", name, err, s.stderr)
	}
	var a sessionAnswer
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: %v: %s", name, err, raw)
	}
	if res.IsError != (a.Error != nil) {
		t.Fatalf("%s: isError %v, error %+v", name, res.IsError, a.Error)
	}
	return a
}

func (s *server) open(t testing.TB, language string, extra ...any) string {
	t.Helper()
	args := map[string]any{"language": language}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	a := s.tool(t, "session_open", args)
	if a.Error != nil || a.Session == nil || len(a.Session.ID) < 24 {
		t.Fatalf("session_open: %+v %+v\n%s", a.Error, a.Session, s.stderr)
	}
	return a.Session.ID
}

func (s *server) in(t testing.TB, id, language, code string, extra ...any) contract.Result {
	t.Helper()
	args := map[string]any{"language": language, "code": code, "session_id": id}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	r, _ := s.call(t, args)
	return r
}

// sessionBox lists the box of session id on the default engine.
func sessionBox(id string) []string {
	return boxes("label=" + sandbox.LabelSession + "=" + sandbox.SessionKey(id))
}

func TestSessionStatePersists(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}} {
		t.Run(b.name, func(t *testing.T) { sessionStatePersists(t, b.start(t, "")) })
	}
}

func sessionStatePersists(t *testing.T, s *server) {
	t.Run("python", func(t *testing.T) {
		id := s.open(t, "python")
		mustOK(t, s.in(t, id, "python", "import json\nx = 41\nrows = [{'a': 1}]\n"))
		r := s.in(t, id, "python", "x += 1\nprint('x', x)\njson.dumps(rows)\n")
		mustOK(t, r)
		if r.Stdout != "x 42\n'[{\"a\": 1}]'\n" || r.Session == nil || r.Session.Call != 2 || r.Session.State != contract.SessionAlive || r.Session.ID != id {
			t.Fatalf("second call: %q %+v", r.Stdout, r.Session)
		}
		r = s.in(t, id, "python", "y = 1\n\nundefined_name\n")
		if e := wantError(t, r, contract.KindRuntime, ""); e.Type != "NameError" || e.Line != 3 {
			t.Fatalf("error %+v", e)
		}
		if r := s.in(t, id, "python", "print(x, y)"); r.Stdout != "42 1\n" {
			t.Fatalf("after an error: %+v", r)
		}
		// Two sessions do not see each other.
		other := s.open(t, "python")
		r = s.in(t, other, "python", "print(x)")
		if e := wantError(t, r, contract.KindRuntime, ""); e.Type != "NameError" {
			t.Fatalf("another session sees x: %+v", e)
		}
		for _, sid := range []string{id, other} {
			if a := s.tool(t, "session_close", map[string]any{"session_id": sid}); !a.Closed {
				t.Fatalf("close: %+v", a.Error)
			}
		}
	})
	t.Run("javascript", func(t *testing.T) {
		id := s.open(t, "javascript")
		mustOK(t, s.in(t, id, "javascript", "const a = 20\nlet b = await new Promise(r => setTimeout(() => r(22), 10))\nglobalThis.c = 1\nfunction add(p, q) { return p + q }\n"))
		r := s.in(t, id, "javascript", "console.log(add(a, b) + c)")
		if mustOK(t, r); r.Stdout != "43\n" {
			t.Fatalf("second call: %q", r.Stdout)
		}
		r = s.in(t, id, "javascript", "\nnull.f()\n")
		if e := wantError(t, r, contract.KindRuntime, ""); e.Type != "TypeError" || e.Line != 2 {
			t.Fatalf("error %+v\n%s", e, r.Stderr)
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
	})
	t.Run("bash", func(t *testing.T) {
		id := s.open(t, "bash")
		mustOK(t, s.in(t, id, "bash", "N=5\ngreet() { echo \"hi $1\"; }\nmkdir -p sub && cd sub && echo data > f.txt\n"))
		r := s.in(t, id, "bash", "greet $N\npwd\ncat f.txt")
		if mustOK(t, r); r.Stdout != "hi 5\n/workspace/sub\ndata\n" {
			t.Fatalf("second call: %q", r.Stdout)
		}
		r = s.in(t, id, "bash", "echo unreachable\nif then\n")
		if wantError(t, r, contract.KindSyntax, ""); strings.Contains(r.Stdout, "unreachable") {
			t.Fatalf("a script with a syntax error ran: %q", r.Stdout)
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
	})
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("closed sessions left boxes: %v", left)
	}
}

// waitNoSessionBoxes waits, up to boxRemoval, for s's session boxes on
// its engine to be gone (a closed session's box is removed after
// session_close answered), and returns those that are not (other
// servers' are none of its).
func (s *server) waitNoSessionBoxes(t *testing.T) []string {
	deadline := time.Now().Add(boxRemoval)
	for {
		left := engineBoxes(t, s.host, strconv.Itoa(s.cmd.Process.Pid), "label="+sandbox.LabelSession)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestSessionErrors(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}} {
		t.Run(b.name, func(t *testing.T) { sessionErrors(t, b.start(t, "limits:\n  memory: 256MiB\n")) })
	}
}

func sessionErrors(t *testing.T, s *server) {
	t.Run("unknown and closed ids are session_not_found", func(t *testing.T) {
		r := s.in(t, "s_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "python", "print(1)")
		wantError(t, r, contract.KindSessionNotFound, "")
		id := s.open(t, "python")
		s.tool(t, "session_close", map[string]any{"session_id": id})
		wantError(t, s.in(t, id, "python", "print(1)"), contract.KindSessionNotFound, "")
		if a := s.tool(t, "session_close", map[string]any{"session_id": "s_nope"}); a.Error == nil || a.Error.Kind != contract.KindSessionNotFound {
			t.Fatalf("closing an unknown id: %+v", a)
		}
	})
	t.Run("a timeout loses the session, then session_lost", func(t *testing.T) {
		id := s.open(t, "python")
		mustOK(t, s.in(t, id, "python", "x = 1"))
		r := s.in(t, id, "python", "import time\ntime.sleep(30)", "timeout_seconds", 1)
		wantError(t, r, contract.KindTimeout, contract.LimitWallTime)
		if r.Session == nil || r.Session.State != contract.SessionLost || !strings.Contains(r.Error.Hint, "new session") {
			t.Fatalf("the timed-out call: %+v %+v", r.Session, r.Error)
		}
		for range 2 {
			e := wantError(t, s.in(t, id, "python", "print(x)"), contract.KindSessionLost, "")
			if !strings.Contains(e.Message, "timeout") {
				t.Fatalf("session_lost says: %+v", e)
			}
		}
	})
	t.Run("running out of memory loses the session", func(t *testing.T) {
		id := s.open(t, "python")
		mustOK(t, s.in(t, id, "python", "x = 1"))
		r := s.in(t, id, "python", "b = []\nwhile True:\n    b.append(bytearray(16 << 20))\n")
		// Under gVisor the kernel may kill the box's whole sandbox; the
		// verdict then comes from the kernel's OOM record.
		wantError(t, r, contract.KindOOM, contract.LimitMemory)
		if r.Session == nil || r.Session.State != contract.SessionLost {
			t.Fatalf("the OOM call: %+v", r.Session)
		}
		wantError(t, s.in(t, id, "python", "print(x)"), contract.KindSessionLost, "")
	})
	t.Run("cancellation interrupts the cell and keeps the session", func(t *testing.T) {
		id := s.open(t, "python")
		mustOK(t, s.in(t, id, "python", "kept = 'yes'"))
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := s.c.CallTool(ctx, newCall(map[string]any{"language": "python", "code": "while True:\n    pass\n", "session_id": id}))
		if err == nil {
			t.Fatal("the cancelled call answered")
		}
		start := time.Now()
		r := s.in(t, id, "python", "print(kept)")
		if mustOK(t, r); r.Stdout != "yes\n" || time.Since(start) > 10*time.Second {
			t.Fatalf("after the cancellation: %q in %s", r.Stdout, time.Since(start))
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
	})
	t.Run("the idle TTL closes a session", func(t *testing.T) {
		id := s.open(t, "bash", "idle_ttl_seconds", 2)
		mustOK(t, s.in(t, id, "bash", "A=1"))
		time.Sleep(4 * time.Second)
		wantError(t, s.in(t, id, "bash", "echo $A"), contract.KindSessionNotFound, "")
		if a := s.tool(t, "session_list", map[string]any{}); len(a.Sessions) != 0 {
			t.Fatalf("still listed: %+v", a.Sessions)
		}
	})
	if left := s.waitNoSessionBoxes(t); len(left) > 0 {
		t.Fatalf("sessions left boxes: %v", left)
	}
}

// A session lives in its box: a server killed with SIGKILL leaves it
// running, and a new server finds it by its labels and carries on.
func TestSessionSurvivesKill9(t *testing.T) {
	manifest := writeManifest(t, "audit:\n  enabled: false\n")
	a := startServer(t, secretEnv, "--manifest", manifest)
	id := a.open(t, "python")
	mustOK(t, a.in(t, id, "python", "import json\nstate = {'n': 41}\n"))
	_ = a.cmd.Process.Kill()
	_, _ = a.cmd.Process.Wait()
	_ = a.c.Close()
	if left := sessionBox(id); len(left) != 1 {
		t.Fatalf("session boxes after kill -9: %v", left)
	}
	// runbox sessions lists it by its key, never its id.
	out, err := exec.Command(runboxBin, "sessions", "--json", "--manifest", manifest).CombinedOutput()
	if err != nil || !strings.Contains(string(out), sandbox.SessionKey(id)) || strings.Contains(string(out), id) {
		t.Fatalf("runbox sessions: %v\n%s", err, out)
	}

	b := startServer(t, secretEnv, "--manifest", manifest)
	defer b.close()
	r := b.in(t, id, "python", "state['n'] += 1\njson.dumps(state)")
	if mustOK(t, r); r.Stdout != "'{\"n\": 42}'\n" || r.Session.Call != 2 {
		t.Fatalf("after the restart: %q %+v\n%s", r.Stdout, r.Session, b.stderr)
	}
	if r := b.in(t, id, "python", "print(state['n'])"); r.Stdout != "42\n" {
		t.Fatalf("third call: %+v", r)
	}
	if a := b.tool(t, "session_close", map[string]any{"session_id": id}); !a.Closed {
		t.Fatalf("close: %+v", a.Error)
	}
	if left := waitNoBoxes(10*time.Second, "label="+sandbox.LabelSession+"="+sandbox.SessionKey(id)); len(left) > 0 {
		out, _ := exec.Command("docker", append([]string{"inspect", "--format", "{{.State.Status}}"}, left...)...).CombinedOutput()
		t.Fatalf("boxes left: %v %s", left, out)
	}
}
