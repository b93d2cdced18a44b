package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/internal/tasks"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// gateRunner answers a job when its gate opens, or says cancelled when
// the call's context ends first.
type gateRunner struct {
	gate      chan struct{}
	cancelled atomic.Int32
}

func (r *gateRunner) Run(ctx context.Context, req sandbox.RunRequest) contract.Result {
	job := req.Job
	select {
	case <-r.gate:
	case <-ctx.Done():
		r.cancelled.Add(1)
	}
	code := 0
	return contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, ExitCode: &code, Stdout: "out:" + job.Code, Artifacts: []contract.Artifact{}}
}
func (r *gateRunner) Sessions() sandbox.SessionRunner                   { return nil }
func (r *gateRunner) Peek(context.Context, string) (sandbox.Peek, bool) { return sandbox.Peek{}, false }
func (r *gateRunner) Close() error                                      { return nil }

// modernCall is a JSON-RPC request of protocol 2026-07-28; tasks says
// whether it declares the Tasks extension.
func modernCall(id int, method string, params map[string]any, tasks bool) []byte {
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if tasks {
		caps["extensions"] = map[string]any{ExtensionTasks: map[string]any{}}
	}
	params["_meta"] = map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "tasks-test", "version": "1"},
		mcp.MetaKeyClientCapabilities: caps,
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return b
}

type rpcAnswer struct {
	Result map[string]json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (a rpcAnswer) str(key string) string {
	var s string
	_ = json.Unmarshal(a.Result[key], &s)
	return s
}

// httpTasks serves New's server over streamable HTTP with two tokens.
func httpTasks(t *testing.T, r *gateRunner) func(token string, id int, method string, params map[string]any, tasks bool) rpcAnswer {
	return httpTasksOf(t, r, manifest.Default())
}

func httpTasksOf(t *testing.T, r *gateRunner, m *manifest.Manifest) func(token string, id int, method string, params map[string]any, tasks bool) rpcAnswer {
	t.Helper()
	return httpTasksWith(t, r, m, Options{Version: "test", Transport: TransportHTTP}, "tasks-test")
}

// httpTasksWith serves New(m, r, o) over streamable HTTP, to a client
// that names itself client.
func httpTasksWith(t *testing.T, r *gateRunner, m *manifest.Manifest, o Options, client string) func(token string, id int, method string, params map[string]any, tasks bool) rpcAnswer {
	t.Helper()
	h, shutdown := New(m, r, o).Handler(
		HTTPConfig{Transport: TransportHTTP, Addr: "127.0.0.1:0", Tokens: map[string]string{"alice": "alice-token-0123456789", "bob": "bob-token-0123456789abc"}})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { close(r.gate); _ = shutdown(context.Background()); srv.Close() })
	return func(token string, id int, method string, params map[string]any, tasks bool) rpcAnswer {
		t.Helper()
		name := params["name"]
		if name == nil {
			name = params["taskId"]
		}
		body := bytes.Replace(modernCall(id, method, params, tasks), []byte(`"tasks-test"`), []byte(strconv.Quote(client)), 1)
		req, _ := http.NewRequest("POST", srv.URL+PathMCP, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, method)
		if name != nil {
			req.Header.Set(mcp.HeaderName, fmt.Sprint(name))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		// A JSON body, or the last data line of an event stream.
		var a rpcAnswer
		for _, line := range strings.Split(string(answer), "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "data:"))
			if strings.HasPrefix(line, "{") && strings.Contains(line, `"id"`) {
				a = rpcAnswer{}
				if err := json.Unmarshal([]byte(line), &a); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
			}
		}
		return a
	}
}

func runArgs(code string) map[string]any {
	return map[string]any{"name": "run_code", "arguments": map[string]any{"language": "python", "code": code}}
}

func waitStatus(t *testing.T, get func() rpcAnswer, want string) rpcAnswer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := get()
		if a.Error != nil {
			t.Fatalf("tasks/get: %+v", a.Error)
		}
		if a.str("status") == want {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %q, want %q", a.str("status"), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTasksOverHTTP(t *testing.T) {
	r := &gateRunner{gate: make(chan struct{})}
	do := httpTasks(t, r)

	created := do("alice-token-0123456789", 1, "tools/call", runArgs("print(1)"), true)
	if created.Error != nil || created.str("resultType") != "task" || created.str("status") != "working" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	id := created.str("taskId")
	for _, k := range []string{"createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		if _, ok := created.Result[k]; !ok {
			t.Errorf("CreateTaskResult has no %s", k)
		}
	}
	get := func(token string) rpcAnswer {
		return do(token, 2, "tasks/get", map[string]any{"taskId": id}, true)
	}
	if a := get("alice-token-0123456789"); a.str("status") != "working" || a.str("resultType") != "complete" {
		t.Fatalf("working: %s", a.Result)
	}
	// Another token's client: the same answer as for a task that never was.
	other := get("bob-token-0123456789abc")
	missing := do("bob-token-0123456789abc", 3, "tasks/get", map[string]any{"taskId": "NOSUCHTASK"}, true)
	if other.Error == nil || other.Error.Code != mcp.INVALID_PARAMS || missing.Error == nil || other.Error.Message != missing.Error.Message {
		t.Fatalf("bob reads alice's task: %+v, a missing one: %+v", other.Error, missing.Error)
	}
	if a := do("bob-token-0123456789abc", 4, "tasks/cancel", map[string]any{"taskId": id}, true); a.Error == nil || a.Error.Code != mcp.INVALID_PARAMS {
		t.Fatalf("bob cancels alice's task: %+v", a)
	}
	// Without the extension declared: -32021, for tasks/get and for task
	// notifications asked of subscriptions/listen.
	if a := do("alice-token-0123456789", 5, "tasks/get", map[string]any{"taskId": id}, false); a.Error == nil || a.Error.Code != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY {
		t.Fatalf("tasks/get without the extension: %+v", a)
	}
	listen := map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}
	if a := do("alice-token-0123456789", 8, "subscriptions/listen", listen, false); a.Error == nil || a.Error.Code != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY {
		t.Fatalf("task notifications without the extension: %+v", a)
	}

	r.gate <- struct{}{}
	done := waitStatus(t, func() rpcAnswer { return get("alice-token-0123456789") }, "completed")
	var result map[string]json.RawMessage
	if err := json.Unmarshal(done.Result["result"], &result); err != nil {
		t.Fatal(err)
	}
	// A plain call (no extension) answers the same shape at once.
	go func() { r.gate <- struct{}{} }()
	plain := do("alice-token-0123456789", 6, "tools/call", runArgs("print(1)"), false)
	if plain.str("resultType") == "task" || plain.Error != nil {
		t.Fatalf("a call without the extension got a task: %s", plain.Result)
	}
	t.Logf("task result keys %s; plain %s", keys(result), keys(plain.Result))
	if keys(result) != keys(plain.Result) {
		t.Fatalf("task result %s, plain %s", keys(result), keys(plain.Result))
	}
	var sc struct {
		Status string `json:"status"`
		Stdout string `json:"stdout"`
	}
	_ = json.Unmarshal(result["structuredContent"], &sc)
	if sc.Status != "ok" || sc.Stdout != "out:print(1)" {
		t.Fatalf("structured: %s", result["structuredContent"])
	}
	if a := do("alice-token-0123456789", 7, "tasks/cancel", map[string]any{"taskId": id}, true); a.Error != nil {
		t.Fatalf("cancel of a finished task: %+v", a.Error)
	}
	if a := get("alice-token-0123456789"); a.str("status") != "completed" {
		t.Fatalf("a finished task cancelled: %s", a.Result)
	}
}

// A task's result is its run's, which the run registry keeps (in memory,
// or in the run store): tasks/get renders it as the call answered it, byte
// for byte the answer of the same call made plainly, for a client that
// reads structured content and for one that reads content only. The task
// itself keeps no copy of it.
func TestTaskResultIsTheRunsAnswer(t *testing.T) {
	for _, c := range []struct {
		name, client string
		disk         bool
	}{{"memory", "tasks-test", false}, {"disk", "tasks-test", true}, {"content only", "codex-test", true}} {
		t.Run(c.name, func(t *testing.T) {
			r := &gateRunner{gate: make(chan struct{})}
			o := Options{Version: "test", Transport: TransportHTTP}
			dir := t.TempDir()
			if c.disk {
				store, err := runstore.Open(dir, runstore.Options{Keep: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				o.Runs = store
			}
			do := httpTasksWith(t, r, manifest.Default(), o, c.client)
			const alice = "alice-token-0123456789"
			id := do(alice, 1, "tools/call", runArgs("print(3)"), true).str("taskId")
			r.gate <- struct{}{}
			done := waitStatus(t, func() rpcAnswer { return do(alice, 2, "tasks/get", map[string]any{"taskId": id}, true) }, "completed")
			go func() { r.gate <- struct{}{} }()
			plain := do(alice, 3, "tools/call", runArgs("print(3)"), false)
			task, _ := json.Marshal(done.Result["result"])
			var asTask map[string]json.RawMessage
			_ = json.Unmarshal(task, &asTask)
			got, _ := json.Marshal(asTask)
			want, _ := json.Marshal(plain.Result)
			runOf := func(a map[string]json.RawMessage) string {
				var text []struct {
					Text string `json:"text"`
				}
				_ = json.Unmarshal(a["content"], &text)
				if len(text) == 0 {
					return ""
				}
				i := strings.Index(text[0].Text, "r_")
				if i < 0 {
					return ""
				}
				return strings.Fields(text[0].Text[i:])[0]
			}
			taskRun, plainRun := runOf(asTask), runOf(plain.Result)
			if taskRun == "" || plainRun == "" {
				t.Fatalf("no run id in the answers:\n%s\n%s", got, want)
			}
			if g := strings.ReplaceAll(string(got), taskRun, "RUN"); g != strings.ReplaceAll(string(want), plainRun, "RUN") {
				t.Fatalf("the task's result is not the plain call's:\n%s\n%s", got, want)
			}
			if _, ok := asTask["structuredContent"]; ok == (c.client == "codex-test") {
				t.Fatalf("structured content for %s: %s", c.client, got)
			}
			if c.disk {
				e, ok := o.Runs.Get("task", id)
				if !ok || bytes.Contains(e.Data, []byte("print(3)")) {
					t.Fatalf("the task's record keeps its result: %s", e.Data)
				}
			}
		})
	}
}

func TestTaskCancelOverHTTP(t *testing.T) {
	r := &gateRunner{gate: make(chan struct{})}
	do := httpTasks(t, r)
	created := do("alice-token-0123456789", 1, "tools/call", runArgs("import time; time.sleep(60)"), true)
	id := created.str("taskId")
	if a := do("alice-token-0123456789", 2, "tasks/cancel", map[string]any{"taskId": id}, true); a.Error != nil || a.str("resultType") != "complete" {
		t.Fatalf("cancel: %+v %s", a.Error, a.Result)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.cancelled.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitStatus(t, func() rpcAnswer {
		return do("alice-token-0123456789", 3, "tasks/get", map[string]any{"taskId": id}, true)
	}, "cancelled")
}

// run_code and saved tools run as tasks; the other built-ins answer as
// before, the extension declared or not.
func TestWhichToolsRunAsTasks(t *testing.T) {
	r := &gateRunner{gate: make(chan struct{})}
	m := manifest.Default()
	m.SavedTools = manifest.SavedTools{Enabled: true, Dir: t.TempDir()}
	do := httpTasksOf(t, r, m)
	const alice = "alice-token-0123456789"
	if a := do(alice, 1, "tools/call", map[string]any{"name": "delete_tool", "arguments": map[string]any{"name": "nosuch"}}, true); a.Error != nil || a.str("resultType") == "task" {
		t.Fatalf("delete_tool ran as a task: %+v %s", a.Error, a.Result)
	}
	save := map[string]any{"name": "double", "description": "Doubles n.", "language": "python", "code": "print(2)"}
	if a := do(alice, 2, "tools/call", map[string]any{"name": "save_tool", "arguments": save}, true); a.Error != nil || a.str("resultType") == "task" {
		t.Fatalf("save_tool ran as a task: %+v %s", a.Error, a.Result)
	}
	a := do(alice, 3, "tools/call", map[string]any{"name": "double", "arguments": map[string]any{}}, true)
	if a.Error != nil || a.str("resultType") != "task" {
		t.Fatalf("a saved tool did not run as a task: %+v %s", a.Error, a.Result)
	}
	r.gate <- struct{}{}
	done := waitStatus(t, func() rpcAnswer {
		return do(alice, 4, "tasks/get", map[string]any{"taskId": a.str("taskId")}, true)
	}, "completed")
	if !bytes.Contains(done.Result["result"], []byte("out:print(2)")) {
		t.Fatalf("saved tool's result: %s", done.Result["result"])
	}
	// An unknown tool is mcp-go's to refuse, not a task.
	if a := do(alice, 5, "tools/call", map[string]any{"name": "nosuch", "arguments": map[string]any{}}, true); a.str("resultType") == "task" {
		t.Fatalf("an unknown tool ran as a task: %s", a.Result)
	}
}

func keys(m map[string]json.RawMessage) string {
	var ks []string
	for k := range m {
		if k != "_meta" {
			ks = append(ks, k)
		}
	}
	slicesSort(ks)
	return strings.Join(ks, ",")
}

func slicesSort(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func TestTasksOverStdio(t *testing.T) {
	r := &gateRunner{gate: make(chan struct{})}
	m := manifest.Default()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		_ = New(m, r, Options{Version: "test", Transport: TransportStdio}).ServeStdio(ctx, inR, outW)
	}()
	answers := make(chan rpcAnswer, 16)
	var lines atomic.Int32
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines.Add(1)
			var a struct {
				rpcAnswer
				Method string `json:"method"`
			}
			if json.Unmarshal(sc.Bytes(), &a) == nil && a.Method == "" {
				answers <- a.rpcAnswer
			}
		}
	}()
	send := func(b []byte) rpcAnswer {
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-answers:
			return a
		case <-time.After(30 * time.Second):
			t.Fatal("no answer")
		}
		return rpcAnswer{}
	}
	created := send(modernCall(1, "tools/call", runArgs("print(2)"), true))
	id := created.str("taskId")
	if created.str("resultType") != "task" || id == "" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	get := func() rpcAnswer { return send(modernCall(2, "tasks/get", map[string]any{"taskId": id}, true)) }
	if a := get(); a.str("status") != "working" {
		t.Fatalf("working: %s", a.Result)
	}
	r.gate <- struct{}{}
	done := waitStatus(t, get, "completed")
	if !bytes.Contains(done.Result["result"], []byte("out:print(2)")) {
		t.Fatalf("result: %s", done.Result["result"])
	}
	// Cancel: the call's context ends.
	second := send(modernCall(3, "tools/call", runArgs("import time; time.sleep(60)"), true))
	if a := send(modernCall(4, "tasks/cancel", map[string]any{"taskId": second.str("taskId")}, true)); a.Error != nil {
		t.Fatalf("cancel: %+v", a.Error)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.cancelled.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := send(modernCall(5, "tasks/get", map[string]any{"taskId": second.str("taskId")}, true)); a.str("status") != "cancelled" {
		t.Fatalf("after cancel: %s", a.Result)
	}
	close(r.gate)
}

func TestTaskDeclaration(t *testing.T) {
	l := &taskLayer{builtins: map[string]bool{}}
	for _, c := range []struct {
		name, msg string
		want      bool
	}{
		{"modern, declared", string(modernCall(1, "tasks/get", map[string]any{"taskId": "x"}, true)), true},
		{"modern, not declared", string(modernCall(1, "tasks/get", map[string]any{"taskId": "x"}, false)), false},
		{"2025-11-25 declaring the extension", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, false},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`, false},
		{"extension not an object", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":true}}}}}`, false},
	} {
		var req rpcMessage
		var p requestMeta
		_ = json.Unmarshal([]byte(c.msg), &req)
		_ = json.Unmarshal(req.Params, &p)
		if got := p.declares(); got != c.want {
			t.Errorf("%s: declares %v", c.name, got)
		}
	}
	// A legacy request is mcp-go's to answer, a modern one the layer's.
	if _, _, ok := l.classify([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`)); ok {
		t.Error("the layer took a 2025-11-25 tasks/get")
	}
	if _, _, ok := l.classify([]byte(`{"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"x"}}`)); ok {
		t.Error("the layer took a notification")
	}
}

// A call that asks the client first (an approve: ask endpoint) waits in
// input_required with the question; tasks/update answers it and the call
// goes on to its result.
func TestTaskInputRequired(t *testing.T) {
	r := &gateRunner{gate: make(chan struct{})}
	m := manifest.Default()
	m.Network.Allow = []manifest.Endpoint{{Host: "api.example.com", Approve: manifest.ApproveAsk}}
	do := httpTasksOf(t, r, m)
	const alice = "alice-token-0123456789"
	created := do(alice, 1, "tools/call", runArgs("print(3)"), true)
	id := created.str("taskId")
	if created.Error != nil || id == "" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	get := func() rpcAnswer { return do(alice, 2, "tasks/get", map[string]any{"taskId": id}, true) }
	asked := waitStatus(t, get, "input_required")
	var inputs map[string]json.RawMessage
	if err := json.Unmarshal(asked.Result["inputRequests"], &inputs); err != nil || len(inputs) != 1 {
		t.Fatalf("inputRequests: %s %v", asked.Result["inputRequests"], err)
	}
	var key string
	for k := range inputs {
		key = k
	}
	if !bytes.Contains(inputs[key], []byte("elicitation/create")) || !bytes.Contains(inputs[key], []byte("api.example.com")) {
		t.Fatalf("the question: %s", inputs[key])
	}
	if a := do("bob-token-0123456789abc", 3, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}, true); a.Error == nil || a.Error.Code != mcp.INVALID_PARAMS {
		t.Fatalf("bob answered alice's task: %+v", a)
	}
	up := do(alice, 4, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"allow": true}}}}, true)
	if up.Error != nil || up.str("resultType") != "complete" {
		t.Fatalf("update: %+v %s", up.Error, up.Result)
	}
	r.gate <- struct{}{}
	done := waitStatus(t, get, "completed")
	if !bytes.Contains(done.Result["result"], []byte("out:print(3)")) {
		t.Fatalf("result: %s", done.Result["result"])
	}
}

func (*gateRunner) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (*gateRunner) MarkKept(string) {}

// Tasks over the deprecated SSE transport: the CreateTaskResult and the
// tasks/* answers come on the session's event stream, as every answer
// does there; the task's own call runs in the same session and none of
// its messages reach the client.
func TestTasksOverSSE(t *testing.T) {
	r := &gateRunner{gate: make(chan struct{})}
	h, shutdown := New(manifest.Default(), r, Options{Version: "test", Transport: TransportSSE}).Handler(
		HTTPConfig{Transport: TransportSSE, Addr: "127.0.0.1:0", Tokens: map[string]string{"alice": "alice-token-0123456789"}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer func() { _ = shutdown(context.Background()) }()
	const token = "Bearer alice-token-0123456789"
	req, _ := http.NewRequest("GET", srv.URL+PathSSE, nil)
	req.Header.Set("Authorization", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	endpoint := make(chan string, 1)
	answers := make(chan rpcAnswer, 16)
	var leaked atomic.Int32
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event:"); ok {
				event = strings.TrimSpace(e)
				continue
			}
			data, ok := strings.CutPrefix(line, "data:")
			if !ok {
				continue
			}
			data = strings.TrimSpace(data)
			if event == "endpoint" {
				endpoint <- data
				continue
			}
			if strings.Contains(data, taskIDPrefix) {
				leaked.Add(1)
			}
			var a struct {
				rpcAnswer
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(data), &a) == nil && a.Method == "" && len(a.ID) > 0 {
				answers <- a.rpcAnswer
			}
		}
		close(answers)
	}()
	var messages string
	select {
	case messages = <-endpoint:
	case <-time.After(10 * time.Second):
		t.Fatal("no endpoint event")
	}
	if !strings.HasPrefix(messages, "http") {
		messages = srv.URL + messages
	}
	n := 0
	post := func(method string, params map[string]any) rpcAnswer {
		t.Helper()
		n++
		req, _ := http.NewRequest("POST", messages, bytes.NewReader(modernCall(n, method, params, true)))
		req.Header.Set("Authorization", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
		}
		select {
		case a := <-answers:
			return a
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer to %s on the stream", method)
		}
		return rpcAnswer{}
	}
	created := post("tools/call", runArgs("print(1)"))
	id := created.str("taskId")
	if created.str("resultType") != "task" || id == "" {
		t.Fatalf("created: %+v %s", created.Error, created.Result)
	}
	if got := post("tasks/get", map[string]any{"taskId": id}); got.str("status") != "working" {
		t.Fatalf("tasks/get: %+v %s", got.Error, got.Result)
	}
	close(r.gate)
	done := waitStatus(t, func() rpcAnswer { return post("tasks/get", map[string]any{"taskId": id}) }, "completed")
	var result struct {
		Structured contract.Result `json:"structuredContent"`
	}
	if err := json.Unmarshal(done.Result["result"], &result); err != nil || result.Structured.Stdout != "out:print(1)" {
		t.Fatalf("result: %v %s", err, done.Result["result"])
	}
	if leaked.Load() != 0 {
		t.Fatalf("%d messages of the task's own call reached the client", leaked.Load())
	}
}

// A completed task an earlier version wrote keeps its call's answer and
// names no run: tasks/get answers that answer as it was kept.
func TestTaskOfAnEarlierVersion(t *testing.T) {
	l := &taskLayer{}
	kept := json.RawMessage(`{"content":[{"type":"text","text":"kept"}]}`)
	if got := l.result(tasks.Task{ID: "T", Status: tasks.Completed, Result: kept}); string(got) != string(kept) {
		t.Fatalf("the kept answer: %s", got)
	}
}
