package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// downEngine is a platform that answers, once ready is closed, but starts
// no box: every run and every probe fails, as on an engine without the
// image.
type downEngine struct{ ready chan struct{} }

func (e downEngine) Ready(ctx context.Context) error {
	select {
	case <-e.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (downEngine) ImageDigest(context.Context, string) (string, error) {
	return "", errors.New("no such image")
}
func (downEngine) Start(context.Context, sandbox.BoxSpec) (sandbox.Box, error) {
	return nil, &sandbox.EngineError{Msg: "no such image", Hint: "build it"}
}
func (downEngine) Reap(context.Context, func(string) bool) (int, error) { return 0, nil }
func (downEngine) Isolation() string                                    { return "test" }
func (downEngine) Close() error                                         { return nil }
func (downEngine) FindBoxes(context.Context, map[string]string) ([]sandbox.FoundBox, error) {
	return nil, errors.New("no engine")
}
func (downEngine) Attach(context.Context, string) (sandbox.Box, error) {
	return nil, errors.New("no engine")
}
func (downEngine) MarkKept(context.Context, string) error { return nil }

// The manifest is read-only once loaded: the one step that derives the
// manifest the server runs with (derived images) makes a copy, and
// nothing that holds it (the runner, the cache, the server, its tools,
// the probes that describe the images) changes either, through start-up,
// the images' descriptions and calls of every kind.
func TestServeLeavesTheManifestAsLoaded(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	t.Setenv("XDG_CACHE_HOME", dir)
	path := filepath.Join(dir, "runbox.yaml")
	yaml := "packages:\n  python: [tabulate=0.8.9-1]\n" +
		"sessions:\n  enabled: true\n" +
		"saved_tools:\n  enabled: true\n  dir: " + filepath.Join(dir, "tools") + "\n" +
		"cache:\n  enabled: true\n" +
		"audit:\n  enabled: true\n  store_code: true\n  path: " + filepath.Join(dir, "audit.jsonl") + "\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	asLoaded := snapshot(t, loaded)
	m, imgs := derived.Apply(loaded)
	if len(imgs) == 0 || m == loaded {
		t.Fatal("the packages derived no image")
	}
	if snapshot(t, loaded) != asLoaded {
		t.Fatal("deriving the images' manifest changed the loaded one")
	}
	running := snapshot(t, m)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	// The engine is ready, and the images are described, once the client
	// is there to hear it (tools/list_changed).
	engine := downEngine{ready: make(chan struct{})}
	runner := sandbox.New(engine, sandbox.Options{Manifest: m, Logger: logger})
	defer runner.Close()
	s, _, stop, err := serving(ctx, config{transport: "stdio"}, m, runner, nil, imgs, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := client.NewInProcessClient(s.MCP())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	changed := make(chan struct{}, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- struct{}{}
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	close(engine.ready)
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	// The probes fail on this engine; the server registers run_code again
	// with the manifest they describe (tools/list_changed).
	select {
	case <-changed:
	case <-time.After(60 * time.Second):
		t.Fatal("the images were never described")
	}
	if res := call("run_code", map[string]any{"language": "python", "code": "print(1)", "timeout_seconds": 2}); !res.IsError {
		t.Fatalf("a run on an engine without boxes: %+v", res)
	}
	call("session_open", map[string]any{"language": "python", "memory_mib": 64})
	call("run_code", map[string]any{"language": "python", "code": "x", "session_id": "s_none"})
	if res := call("save_tool", map[string]any{"name": "one", "description": "Prints 1.", "language": "bash", "code": "echo 1"}); res.IsError {
		t.Fatalf("save_tool: %+v", res.Content)
	}
	call("one", map[string]any{})
	if snapshot(t, m) != running || snapshot(t, loaded) != asLoaded {
		t.Fatalf("serving changed the manifest:\nwas %s\nnow %s", running, snapshot(t, m))
	}
}

func snapshot(t *testing.T, m *manifest.Manifest) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The images' descriptions are copies: the manifest the runner and the
// server hold keeps its declared versions and packages.
func TestDescribeCopies(t *testing.T) {
	m := manifest.Default()
	was := snapshot(t, m)
	if describe(m, make([]*sandbox.LanguageInfo, len(m.Languages))) != m {
		t.Fatal("no description: the manifest itself")
	}
	d := describe(m, []*sandbox.LanguageInfo{{Version: "3.99", Packages: []string{"numpy 9"}}, nil, nil})
	if d == m || d.Languages[0].Version != "3.99" || d.Languages[1].Version != m.Languages[1].Version {
		t.Fatalf("described %+v", d.Languages)
	}
	if snapshot(t, m) != was {
		t.Fatal("describing changed the manifest")
	}
}
