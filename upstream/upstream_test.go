package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
)

// testServer is a real MCP server (mcp-go) over streamable HTTP.
func testServer(t *testing.T) (*server.MCPServer, string) {
	t.Helper()
	s := server.NewMCPServer("test", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("get-sum", mcp.WithDescription("Adds a and b.\nMore text."), mcp.WithNumber("a", mcp.Required()), mcp.WithNumber("b", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructuredOnly(map[string]any{"sum": req.GetFloat("a", 0) + req.GetFloat("b", 0)}), nil
		})
	s.AddTool(mcp.NewTool("fail", mcp.WithDescription("Fails.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed"), nil
		})
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Waits for its context.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(mcp.NewTool("rm", mcp.WithDescription("Removes.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("removed"), nil
		})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return s, hs.URL + "/mcp"
}

func testSet(t *testing.T, cfg manifest.Server) (*Set, *server.MCPServer) {
	t.Helper()
	s, url := testServer(t)
	cfg.URL = url
	set := NewSet([]manifest.Server{cfg}, Options{})
	t.Cleanup(set.Close)
	return set, s
}

var limits = manifest.ToolCalls{MaxCalls: 5, MaxBytes: 1 << 20, CallTimeoutSeconds: 0.5}

func TestRunCalls(t *testing.T) {
	set, _ := testSet(t, manifest.Server{Name: "my-srv", Deny: []string{"fail*"}, Ask: []string{"rm"}})
	ctx := context.Background()
	var records []Record
	r := set.NewRun(limits, nil, func(rec Record) { records = append(records, rec) })

	a := r.call(ctx, request{Server: "my_srv", Tool: "get_sum", Args: map[string]any{"a": 2, "b": 3}}, 10)
	if a.Error != nil || a.Structured.(map[string]any)["sum"] != 5.0 {
		t.Fatalf("call by identifiers: %+v", a)
	}
	cases := []struct {
		req  request
		kind string
	}{
		{request{Server: "nope", Tool: "x"}, KindUnknownServer},
		{request{Server: "my-srv", Tool: "nope"}, KindUnknownTool},
		{request{Server: "my-srv", Tool: "fail"}, KindDenied},
		{request{Server: "my-srv", Tool: "rm"}, KindRefused},
		{request{Server: "my-srv", Tool: "slow"}, KindTimeout},
	}
	for _, c := range cases {
		if a := r.call(ctx, c.req, 10); a.Error == nil || a.Error.Kind != c.kind {
			t.Errorf("%+v: %+v, want %s", c.req, a.Error, c.kind)
		}
	}
	// Five calls counted so far (an unknown server is not a call).
	if a := r.call(ctx, request{Server: "my-srv", Tool: "get-sum", Args: map[string]any{"a": 1, "b": 1}}, 10); a.Error == nil || a.Error.Kind != KindLimit {
		t.Fatalf("past max_calls: %+v", a.Error)
	}
	if len(records) != 7 || records[0].Outcome != "ok" || records[0].Server != "my-srv" || records[0].Tool != "get-sum" || records[0].BytesOut == 0 {
		t.Fatalf("records %+v", records)
	}
}

func TestRunAsk(t *testing.T) {
	set, _ := testSet(t, manifest.Server{Name: "s", Ask: []string{"*"}})
	var asked []string
	for _, answer := range []error{nil, errors.New("the user answered decline"), ErrNoElicitation} {
		r := set.NewRun(limits, func(ctx context.Context, server, tool string, args map[string]any) error {
			b, _ := json.Marshal(args)
			asked = append(asked, server+"."+tool+" "+string(b))
			return answer
		}, nil)
		a := r.call(context.Background(), request{Server: "s", Tool: "rm", Args: map[string]any{"path": "/x"}}, 10)
		if (answer == nil) != (a.Error == nil) || answer != nil && a.Error.Kind != KindRefused {
			t.Fatalf("answer %v: %+v", answer, a.Error)
		}
	}
	if len(asked) != 3 || asked[0] != `s.rm {"path":"/x"}` {
		t.Fatalf("asked %q", asked)
	}
}

func TestToolErrorAndBytes(t *testing.T) {
	set, _ := testSet(t, manifest.Server{Name: "s"})
	r := set.NewRun(limits, nil, nil)
	if a := r.call(context.Background(), request{Server: "s", Tool: "fail"}, 10); a.Error == nil || a.Error.Kind != KindToolError || a.Error.Message != "it failed" {
		t.Fatalf("isError: %+v", a.Error)
	}
	r = set.NewRun(manifest.ToolCalls{MaxCalls: 10, MaxBytes: 100, CallTimeoutSeconds: 5}, nil, nil)
	if a := r.call(context.Background(), request{Server: "s", Tool: "get-sum"}, 200); a.Error == nil || a.Error.Kind != KindLimit {
		t.Fatalf("past max_bytes: %+v", a.Error)
	}
}

func TestToolsListChanged(t *testing.T) {
	set, s := testSet(t, manifest.Server{Name: "s"})
	changed := make(chan struct{}, 10)
	set.OnToolsChanged(func() { changed <- struct{}{} })
	set.Start()
	set.Ready(context.Background())
	if sum := set.Summaries(); len(sum) != 1 || sum[0].Tools != 4 {
		t.Fatalf("summaries %+v", sum)
	}
	s.AddTool(mcp.NewTool("late", mcp.WithDescription("Added later.")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("late"), nil
	})
	deadline := time.Now().Add(5 * time.Second)
	for len(set.Servers()[0].Known()) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("tools after list_changed: %d", len(set.Servers()[0].Known()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	hits := set.Search(context.Background(), "adds", false, "")
	if len(hits) != 1 || hits[0].Call != "tools.s.get_sum" || hits[0].Description != "Adds a and b." || hits[0].InputSchema != nil ||
		hits[0].Signature != "tools.s.get_sum(*, a: float, b: float) -> Any" {
		t.Fatalf("search %+v", hits)
	}
	if hits := set.Search(context.Background(), "adds", true, "typescript"); !strings.Contains(string(hits[0].InputSchema), `"a"`) ||
		hits[0].Signature != "tools.s.get_sum(args: { a: number; b: number }): Promise<unknown>" {
		t.Fatalf("search with schemas %+v", hits)
	}
	// The typings op declares the tools as they are now, the late one too.
	r := set.NewRun(limits, nil, nil)
	a := r.typings(context.Background(), "typescript")
	if a.Error != nil || !strings.Contains(a.Text, "export function late(args?: LateArgs): Promise<unknown>;") ||
		!strings.Contains(a.Text, "export function get_sum(args: GetSumArgs)") {
		t.Fatalf("typings %+v", a)
	}
	if a := r.typings(context.Background(), "cobol"); a.Error == nil || a.Error.Kind != KindBadRequest || r.Calls() != 0 {
		t.Fatalf("typings in an unknown language %+v", a.Error)
	}
}

func TestUnreachableServer(t *testing.T) {
	set := NewSet([]manifest.Server{{Name: "gone", URL: "http://127.0.0.1:1/mcp", Connect: manifest.ConnectFirstUse}}, Options{})
	defer set.Close()
	r := set.NewRun(limits, nil, nil)
	if a := r.call(context.Background(), request{Server: "gone", Tool: "x"}, 10); a.Error == nil || a.Error.Kind != KindUpstream {
		t.Fatalf("%+v", a.Error)
	}
	if c := set.Catalog(context.Background()); len(c) != 1 || c[0].Error == "" {
		t.Fatalf("catalog %+v", c)
	}
}

func TestIdentifier(t *testing.T) {
	for in, want := range map[string]string{"get-sum": "get_sum", "a.b": "a_b", "9lives": "_9lives", "ok_1": "ok_1", "ünï": "__n__"} {
		if got := Identifier(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestRunTimeBudget(t *testing.T) {
	set, _ := testSet(t, manifest.Server{Name: "s"})
	r := set.NewRun(manifest.ToolCalls{MaxCalls: 10, MaxBytes: 1 << 20, CallTimeoutSeconds: 5, MaxSeconds: 0.3}, nil, nil)
	start := time.Now()
	if a := r.call(context.Background(), request{Server: "s", Tool: "slow"}, 10); a.Error == nil || a.Error.Kind != KindTimeout || time.Since(start) > 2*time.Second {
		t.Fatalf("a call past the run's time: %+v after %s", a.Error, time.Since(start))
	}
	if a := r.call(context.Background(), request{Server: "s", Tool: "get-sum", Args: map[string]any{"a": 1, "b": 1}}, 10); a.Error == nil || a.Error.Kind != KindLimit {
		t.Fatalf("a call once the run's time is spent: %+v", a.Error)
	}
}
