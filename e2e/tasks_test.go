//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) over
// stdio with the reference TypeScript SDK client's request API: a ~10 s
// run answers at once with a task, goes working → completed under the
// SDK's default 60 s request timeout, and its result is shaped as a plain
// call's. RUNBOX_LONG=1 runs it for 150 s, past that timeout.
func TestTypeScriptClientTasks(t *testing.T) {
	seconds := "10"
	if os.Getenv("RUNBOX_LONG") == "1" {
		seconds = "150"
	}
	cmd := exec.Command("node", "tasks.mjs", runboxBin, seconds)
	cmd.Dir = "ts"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts tasks: ") {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// rawClient speaks protocol 2026-07-28 over streamable HTTP with one
// bearer token, one request a POST, as the extension's clients do.
type rawClient struct {
	t     *testing.T
	url   string
	token string
	n     int
}

type rawAnswer struct {
	Result map[string]json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (a rawAnswer) str(key string) string {
	var s string
	_ = json.Unmarshal(a.Result[key], &s)
	return s
}

func (c *rawClient) do(method string, params map[string]any, tasks bool) rawAnswer {
	c.t.Helper()
	c.n++
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "runbox-e2e-tasks", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.n, "method": method, "params": params})
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	} else if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a rawAnswer
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "data:"))
		if strings.HasPrefix(line, "{") && strings.Contains(line, `"id"`) {
			a = rawAnswer{}
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
		}
	}
	if a.Result == nil && a.Error == nil {
		c.t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, raw)
	}
	return a
}

func (c *rawClient) get(id string) rawAnswer {
	return c.do("tasks/get", map[string]any{"taskId": id}, true)
}

// Over HTTP: a task runs working → completed with a plain call's result;
// another token's client finds no such task (the same answer as for an
// id that never was) and cannot cancel it; a cancelled task's box is
// gone at once.
func TestTasksOverHTTP(t *testing.T) {
	s, alice, bob := aliceAndBob(t)
	ca := &rawClient{t: t, url: s.url("http"), token: alice}
	cb := &rawClient{t: t, url: s.url("http"), token: bob}
	ofServer := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(s.cmd.Process.Pid)

	plain := ca.do("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": "print('plain')"}}, false)
	if plain.Error != nil || plain.str("resultType") == "task" {
		t.Fatalf("a call without the extension: %+v %s", plain.Error, plain.Result)
	}

	code := "import time\nfor i in range(8):\n    print(i, flush=True)\n    time.sleep(1)\n"
	created := ca.do("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": code, "timeout_seconds": 120}}, true)
	if created.Error != nil || created.str("resultType") != "task" || created.str("status") != "working" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	id := created.str("taskId")

	other, missing := cb.get(id), cb.get(strings.Repeat("A", len(id)))
	if other.Error == nil || missing.Error == nil || other.Error.Code != -32602 || other.Error.Message != missing.Error.Message {
		t.Fatalf("bob reads alice's task: %+v; a missing one: %+v", other.Error, missing.Error)
	}
	if a := cb.do("tasks/cancel", map[string]any{"taskId": id}, true); a.Error == nil || a.Error.Code != -32602 {
		t.Fatalf("bob cancels alice's task: %+v %s", a.Error, a.Result)
	}

	var statuses []string
	var done rawAnswer
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done = ca.get(id)
		if done.Error != nil {
			t.Fatalf("tasks/get: %+v", done.Error)
		}
		if st := done.str("status"); len(statuses) == 0 || statuses[len(statuses)-1] != st {
			statuses = append(statuses, st)
		}
		if st := done.str("status"); st != "working" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if strings.Join(statuses, ",") != "working,completed" {
		t.Fatalf("statuses %v: %s", statuses, done.Result)
	}
	var result map[string]json.RawMessage
	_ = json.Unmarshal(done.Result["result"], &result)
	if shape(result) != shape(plain.Result) {
		t.Fatalf("task result %s, plain call %s", shape(result), shape(plain.Result))
	}
	var r contract.Result
	if err := json.Unmarshal(result["structuredContent"], &r); err != nil || r.Status != contract.StatusOK || !strings.HasSuffix(r.Stdout, "7\n") {
		t.Fatalf("result: %v %+v", err, r)
	}

	// Cancel: the box goes.
	long := ca.do("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": "import time\nprint('up', flush=True)\ntime.sleep(120)", "timeout_seconds": 150}}, true)
	lid := long.str("taskId")
	deadline = time.Now().Add(2 * time.Minute)
	for len(boxes(ofServer, "status=running")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no box started\n%s", s.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // the program is in its sleep
	start := time.Now()
	if a := ca.do("tasks/cancel", map[string]any{"taskId": lid}, true); a.Error != nil || a.str("resultType") != "complete" {
		t.Fatalf("cancel: %+v %s", a.Error, a.Result)
	}
	// The program sleeps 120 s: a box gone well before is a killed one.
	if left := waitNoBoxes(30*time.Second, ofServer); len(left) > 0 {
		t.Fatalf("boxes of the cancelled task left: %v", left)
	}
	t.Logf("a cancelled task's box was gone %v after tasks/cancel", time.Since(start).Round(time.Millisecond))
	if a := ca.get(lid); a.str("status") != "cancelled" {
		t.Fatalf("after cancel: %s", a.Result)
	}
	if a := ca.do("tasks/cancel", map[string]any{"taskId": id}, true); a.Error != nil || ca.get(id).str("status") != "completed" {
		t.Fatalf("cancel of a finished task: %+v", a.Error)
	}
}

// shape is a result's fields but _meta, in order.
func shape(m map[string]json.RawMessage) string {
	var ks []string
	for k := range m {
		if k != "_meta" {
			ks = append(ks, k)
		}
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return fmt.Sprint(ks)
}

// Over stdio, a cancelled task's box is gone too: the layer cancels the
// call inside mcp-go's own connection.
func TestTaskCancelOverStdio(t *testing.T) {
	cmd := exec.Command(runboxBin, "serve", "--manifest", writeManifest(t, "audit:\n  enabled: false\n"))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	endAtCleanup(t, cmd, in)
	answers := make(chan rawAnswer, 8)
	go func() {
		dec := json.NewDecoder(out)
		for {
			var m struct {
				rawAnswer
				Method string `json:"method"`
			}
			if dec.Decode(&m) != nil {
				close(answers)
				return
			}
			if m.Method == "" {
				answers <- m.rawAnswer
			}
		}
	}()
	n := 0
	send := func(method string, params map[string]any) rawAnswer {
		t.Helper()
		n++
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
		if _, err := in.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		select {
		case a, ok := <-answers:
			if !ok {
				t.Fatalf("the server closed its output\n%s", stderr)
			}
			return a
		case <-time.After(2 * time.Minute):
			t.Fatalf("no answer to %s\n%s", method, stderr)
		}
		return rawAnswer{}
	}
	ofServer := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(cmd.Process.Pid)
	created := send("tools/call", map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": "import time\nprint('up', flush=True)\ntime.sleep(120)", "timeout_seconds": 150}})
	id := created.str("taskId")
	if created.str("resultType") != "task" || id == "" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(boxes(ofServer, "status=running")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no box started\n%s", stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	start := time.Now()
	if a := send("tasks/cancel", map[string]any{"taskId": id}); a.Error != nil {
		t.Fatalf("cancel: %+v", a.Error)
	}
	if left := waitNoBoxes(30*time.Second, ofServer); len(left) > 0 {
		t.Fatalf("boxes of the cancelled task left: %v", left)
	}
	t.Logf("a cancelled task's box was gone %v after tasks/cancel", time.Since(start).Round(time.Millisecond))
	if a := send("tasks/get", map[string]any{"taskId": id}); a.str("status") != "cancelled" {
		t.Fatalf("after cancel: %s", a.Result)
	}
}
