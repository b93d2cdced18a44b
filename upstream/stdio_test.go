package upstream

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
)

// The test binary doubles as a stdio MCP server (RUNBOX_UPSTREAM_TEST_SERVER
// set): pid answers its process id, crash exits mid-call, secret answers a
// variable of its environment.
func TestMain(m *testing.M) {
	if os.Getenv("RUNBOX_UPSTREAM_TEST_SERVER") == "1" {
		s := server.NewMCPServer("stdio-test", "1")
		s.AddTool(mcp.NewTool("pid"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
		})
		s.AddTool(mcp.NewTool("crash"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
		s.AddTool(mcp.NewTool("secret"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(os.Getenv("SERVER_TOKEN")), nil
		})
		_ = server.ServeStdio(s)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestStdioRestartAndEnv(t *testing.T) {
	t.Setenv("RUNBOX_UPSTREAM_TEST_SERVER", "1")
	set := NewSet([]manifest.Server{{Name: "local", Command: os.Args[0], Env: map[string]string{"SERVER_TOKEN": "HOST_VAR_NAME"}}},
		Options{Getenv: func(k string) string { return map[string]string{"HOST_VAR_NAME": "from-the-host"}[k] }})
	defer set.Close()
	r := set.NewRun(manifest.ToolCalls{MaxCalls: 10, MaxBytes: 1 << 20, CallTimeoutSeconds: 10}, nil, nil)
	ctx := context.Background()
	text := func(a answer) string {
		if a.Error != nil || len(a.Content) != 1 {
			t.Fatalf("answer %+v", a)
		}
		return a.Content[0].Text
	}
	if got := text(r.call(ctx, request{Server: "local", Tool: "secret"}, 10)); got != "from-the-host" {
		t.Fatalf("the server's variable: %q", got)
	}
	pid := text(r.call(ctx, request{Server: "local", Tool: "pid"}, 10))
	if a := r.call(ctx, request{Server: "local", Tool: "crash"}, 10); a.Error == nil || a.Error.Kind != KindUpstream {
		t.Fatalf("a crash mid-call: %+v", a.Error)
	}
	if again := text(r.call(ctx, request{Server: "local", Tool: "pid"}, 10)); again == pid {
		t.Fatalf("not restarted: pid %s both times", pid)
	}
	if n := set.Servers()[0].Restarts(); n != 1 {
		t.Fatalf("%d restarts", n)
	}
}
