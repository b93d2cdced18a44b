package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// echoRunner answers every job with its stdin as stdout.
type echoRunner struct {
	mu   sync.Mutex
	jobs []contract.Job
}

func (r *echoRunner) Run(ctx context.Context, req sandbox.RunRequest) contract.Result {
	job := req.Job
	r.mu.Lock()
	r.jobs = append(r.jobs, job)
	r.mu.Unlock()
	code := 0
	return contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, ExitCode: &code, Stdout: job.Stdin, Artifacts: []contract.Artifact{}}
}
func (r *echoRunner) Sessions() sandbox.SessionRunner                   { return nil }
func (r *echoRunner) Peek(context.Context, string) (sandbox.Peek, bool) { return sandbox.Peek{}, false }
func (r *echoRunner) Close() error                                      { return nil }

func inProcess(t *testing.T, m *manifest.Manifest, r *echoRunner) (*client.Client, chan string) {
	t.Helper()
	c, err := client.NewInProcessClient(New(m, r, Options{Version: "test"}).MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	notes := make(chan string, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) { notes <- n.Method })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(context.Background(), init); err != nil {
		t.Fatal(err)
	}
	return c, notes
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func call(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSavedTools(t *testing.T) {
	m := manifest.Default()
	if got := toolNames(t, func() *client.Client { c, _ := inProcess(t, m, &echoRunner{}); return c }()); strings.Join(got, ",") != "run_cancel,run_code,run_wait" {
		t.Fatalf("saving off by default: %v", got)
	}
	m.SavedTools = manifest.SavedTools{Enabled: true, Dir: t.TempDir()}
	r := &echoRunner{}
	c, notes := inProcess(t, m, r)
	if got := toolNames(t, c); strings.Join(got, ",") != "delete_tool,run_cancel,run_code,run_wait,save_tool" {
		t.Fatalf("tools %v", got)
	}
	for _, bad := range []map[string]any{
		{"name": "run_code", "description": "x", "language": "python", "code": "print(1)"},
		{"name": "Bad Name", "description": "x", "language": "python", "code": "print(1)"},
		{"name": "ok", "description": "x", "language": "cobol", "code": "print(1)"},
		{"name": "ok", "description": "x", "language": "python", "code": "print(1)", "input_schema": map[string]any{"type": "string"}},
		{"name": "ok", "description": "", "language": "python", "code": "print(1)"},
	} {
		if res := call(t, c, "save_tool", bad); !res.IsError {
			t.Errorf("saved %v", bad)
		}
	}
	save := map[string]any{"name": "double", "description": "Doubles n.", "language": "python", "code": "import json,sys\nprint(json.load(sys.stdin)['n']*2)",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}
	for v := 1; v <= 2; v++ {
		res := call(t, c, "save_tool", save)
		if res.IsError || fmt.Sprint(res.StructuredContent.(map[string]any)["version"]) != fmt.Sprint(v) {
			t.Fatalf("save %d: %+v", v, res)
		}
	}
	select {
	case n := <-notes:
		if n != string(mcp.MethodNotificationToolsListChanged) {
			t.Fatalf("notification %s", n)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no tools/list_changed")
	}
	res := call(t, c, "double", map[string]any{"n": 21})
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(b), `"stdout":"{\"n\":21}"`) || len(r.jobs) != 1 || !strings.Contains(r.jobs[0].Code, "*2") || r.jobs[0].Files[0].Path != "input.json" {
		t.Fatalf("calling the saved tool: %s, jobs %+v", b, r.jobs)
	}

	// A restart serves it again; deleting removes it.
	c2, _ := inProcess(t, m, r)
	if got := toolNames(t, c2); !slices.Contains(got, "double") {
		t.Fatalf("after a restart: %v", got)
	}
	if res := call(t, c2, "delete_tool", map[string]any{"name": "double"}); res.IsError {
		t.Fatalf("delete: %+v", res)
	}
	if got := toolNames(t, c2); slices.Contains(got, "double") {
		t.Fatalf("after delete: %v", got)
	}
	if res := call(t, c2, "delete_tool", map[string]any{"name": "double"}); !res.IsError {
		t.Fatal("deleting twice")
	}
	c3, _ := inProcess(t, m, r)
	if got := toolNames(t, c3); slices.Contains(got, "double") {
		t.Fatalf("deleted, then restarted: %v", got)
	}
}

func (*echoRunner) Adopt(_ context.Context, d sandbox.Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (*echoRunner) MarkKept(string) {}
