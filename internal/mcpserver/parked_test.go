package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// answer is what a client reads of a POST's answer: a JSON-RPC error, or
// run_code's result.
type answer struct {
	code                   int
	rpcMessage             string
	status, stdout         string
	kind, message          string
	isError, hasStructured bool
}

func answerOf(t *testing.T, raw []byte) answer {
	t.Helper()
	var a struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result *struct {
			IsError    bool             `json:"isError"`
			Structured *contract.Result `json:"structuredContent"`
			Content    []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if len(raw) == 0 {
		return answer{rpcMessage: "(none)"}
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %.300q: %v", raw, err)
	}
	var got answer
	switch {
	case a.Error != nil:
		got.code, got.rpcMessage = a.Error.Code, a.Error.Message
	case a.Result != nil:
		got.isError = a.Result.IsError
		if r := a.Result.Structured; r != nil {
			got.hasStructured, got.status, got.stdout = true, string(r.Status), r.Stdout
			if r.Error != nil {
				got.kind, got.message = string(r.Error.Kind), r.Error.Message
			}
		} else if len(a.Result.Content) > 0 {
			got.message = a.Result.Content[0].Text
		}
	}
	return got
}

// post serves body, held as bodyLimit holds it, with h as a modern
// client's POST.
func post(t *testing.T, h http.Handler, body string) answer {
	t.Helper()
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_code"} {
		r.Header.Set(k, v)
	}
	holdBody(r, []byte(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return answerOf(t, w.Body.Bytes())
}

// Parking changes nothing a client sees: every call, parked or not,
// well-formed or not, is answered as mcp-go and run_code answer it
// unparked, and the handler reads the arguments mcp-go would have read.
func TestParkedCallsAnswerAsUnparked(t *testing.T) {
	r := &echoRunner{}
	s := New(manifest.Default(), r, Options{Version: "test", Transport: TransportHTTP})
	streamableHTTP := streamable{server.NewStreamableHTTPServer(s.mcp, server.WithEndpointPath(PathMCP), server.WithHTTPContextFunc(principalFromRequest))}
	parked, unparked := argumentParking{0}.http(streamableHTTP), http.Handler(streamableHTTP)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code",` + meta + `,` + params + `}}`
	}
	for name, tc := range map[string]struct {
		body   string
		stdout string // the stdin the box got, echoed; "" when none ran
	}{
		"a call":                       {call(`"arguments":{"language":"python","code":"print(1)","stdin":"one"}`), "one"},
		"escapes in the arguments":     {call(`"arguments":{"language":"python","code":"print(\"}\")","stdin":"a\"}\n\u00e9"}`), "a\"}\né"},
		"arguments then more params":   {`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{"language":"python","code":"1","stdin":"first"},"name":"run_code",` + meta + `}}`, "first"},
		"duplicated arguments":         {call(`"arguments":{"language":"python","code":"1","stdin":"first"},"arguments":{"language":"python","code":"1","stdin":"last"}`), "last"},
		"arguments in another case":    {call(`"arguments":{"language":"python","code":"1","stdin":"lower"},"Arguments":{"language":"python","code":"1","stdin":"upper"}`), "upper"},
		"duplicated keys in arguments": {call(`"arguments":{"language":"python","code":"1","stdin":"first","stdin":"last"}`), "last"},
		"arguments not an object":      {call(`"arguments":"print(1)"`), ""},
		"arguments an array":           {call(`"arguments":[1,2]`), ""},
		"arguments null":               {call(`"arguments":null`), ""},
		"no arguments":                 {call(`"x":1`), ""},
		"an unknown field":             {call(`"arguments":{"language":"python","code":"1","nope":true}`), ""},
		"a tool not parked":            {strings.Replace(call(`"arguments":{"language":"python","code":"1"}`), "run_code", "no_such_tool", 1), ""},
		"malformed JSON":               {strings.TrimSuffix(call(`"arguments":{"language":"python","code":"1"}`), "}"), ""},
		"params not an object":         {`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}`, ""},
		"a notification":               {`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_code",` + meta + `,"arguments":{"language":"python","code":"1"}}}`, ""},
	} {
		want := post(t, unparked, tc.body)
		r.jobs = nil
		got := post(t, parked, tc.body)
		if got != want {
			t.Errorf("%s: parked %+v, unparked %+v", name, got, want)
		}
		if got.stdout != tc.stdout {
			t.Errorf("%s: the box got stdin %q, want %q (%+v)", name, got.stdout, tc.stdout, got)
		}
		if tc.stdout != "" && len(r.jobs) != 1 {
			t.Errorf("%s: %d runs", name, len(r.jobs))
		}
	}
}

func TestPark(t *testing.T) {
	args := `{"language":"python","code":"print(1)"}`
	msg := []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"run_code","arguments":` + args + `,"_meta":{"progressToken":1}}}`)
	call, stub, ok := park(msg)
	if !ok || call.tool != "run_code" || string(call.raw) != args {
		t.Fatalf("parked %v %+v", ok, call)
	}
	if want := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"run_code","arguments":{},"_meta":{"progressToken":1}}}`; string(stub) != want {
		t.Errorf("the message mcp-go reads: %s", stub)
	}
	if &call.raw[0] != &msg[strings.Index(string(msg), args)] {
		t.Error("the parked arguments are a copy")
	}
	for name, msg := range map[string]string{
		"a notification":       `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"run_code","arguments":{}}}`,
		"a null id":            `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"run_code","arguments":{}}}`,
		"another method":       `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"run_code","arguments":{}}}`,
		"another tool":         `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"session_open","arguments":{}}}`,
		"a task's call":        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{},"task":{}}}`,
		"no arguments":         `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code"}}`,
		"null arguments":       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":null}}`,
		"params not an object": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`,
		"malformed":            `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{}}`,
		"a batch":              `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{}}}]`,
	} {
		if _, _, ok := park([]byte(msg)); ok {
			t.Errorf("%s: parked", name)
		}
	}
	if _, ok := offsetIn([]byte("abc"), []byte("b")); ok {
		t.Error("a slice of another array was placed in the message")
	}
}

// The middleware gives a handler only the arguments its own request
// parked for its own tool: there is no id a client could name, forge or
// replay, since a request's parked arguments are in its context alone.
func TestParkedArgumentsReachOnlyTheirCall(t *testing.T) {
	var seen []byte
	h := parkedArguments(func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		seen, _ = req.GetRawArguments().(json.RawMessage)
		return nil, nil
	})
	req := func(tool, args string) mcp.CallToolRequest {
		var r mcp.CallToolRequest
		r.Params.Name, r.Params.RawArguments = tool, json.RawMessage(args)
		return r
	}
	own := context.WithValue(context.Background(), parkedKey{}, parkedCall{tool: "run_code", raw: json.RawMessage(`{"code":"parked"}`)})
	for name, tc := range map[string]struct {
		ctx  context.Context
		req  mcp.CallToolRequest
		want string
	}{
		"its own call":               {own, req("run_code", `{}`), `{"code":"parked"}`},
		"another tool's call":        {own, req("session_open", `{"language":"python"}`), `{"language":"python"}`},
		"a request that parked none": {context.Background(), req("run_code", `{"code":"sent"}`), `{"code":"sent"}`},
		"a key of another type":      {context.WithValue(context.Background(), parkedKey{}, "run_code"), req("run_code", `{"code":"sent"}`), `{"code":"sent"}`},
	} {
		seen = nil
		_, _ = h(tc.ctx, tc.req)
		if string(seen) != tc.want {
			t.Errorf("%s: the handler read %s, want %s", name, seen, tc.want)
		}
	}
}

// A large call that runs as a task (the Tasks layer makes the call
// itself, later, on a request of its own) is parked on that request and
// runs with its arguments.
func TestLargeTaskCallIsParked(t *testing.T) {
	m := manifest.Default()
	m.Limits.CodeBytes = 4 * manifest.MiB
	r := &gateRunner{gate: make(chan struct{})}
	do := httpTasksOf(t, r, m)
	code := "#" + strings.Repeat("x", 2<<20)
	created := do("alice-token-0123456789", 1, "tools/call", runArgs(code), true)
	if created.Error != nil || created.str("resultType") != "task" {
		t.Fatalf("created: %+v %.300s", created.Error, created.Result)
	}
	// The runner takes the gate once the call runs; a call that never
	// runs must not hang the test (nor be left sending on the gate the
	// server's cleanup closes).
	stop, sent := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		select {
		case r.gate <- struct{}{}:
		case <-stop:
		}
	}()
	t.Cleanup(func() { close(stop); <-sent })
	done := waitStatus(t, func() rpcAnswer {
		return do("alice-token-0123456789", 2, "tasks/get", map[string]any{"taskId": created.str("taskId")}, true)
	}, "completed")
	var result struct {
		Structured contract.Result `json:"structuredContent"`
	}
	// The answer keeps the head and the tail of stdout, the runner's echo
	// of the code.
	err := json.Unmarshal(done.Result["result"], &result)
	out := result.Structured.Stdout
	if err != nil || result.Structured.Status != contract.StatusOK ||
		!strings.HasPrefix(out, "out:"+code[:1000]) || !strings.HasSuffix(out, code[len(code)-1000:]) {
		t.Fatalf("the task's result: %v, status %s, %d bytes of stdout: %.120q", err, result.Structured.Status, len(out), out)
	}
}
