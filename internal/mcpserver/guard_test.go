package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/prompts"
)

func promptServer() *server.MCPServer {
	s := server.NewMCPServer("t", "1", server.WithPromptCapabilities(false))
	s.AddPrompts(prompts.All(manifest.Default())...)
	return s
}

const missingResult = `{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"debug_failed_run","arguments":{}}}`

// TestPromptArgumentsOnTheWire: over stdio, a prompts/get without its
// required argument answers -32602 naming it (mcp-go alone says -32603),
// and everything else still reaches mcp-go.
func TestPromptArgumentsOnTheWire(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = bare(promptServer()).ServeStdio(ctx, inR, outW) }()
	lines := bufio.NewScanner(outR)
	ask := func(msg string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatal("no answer")
		}
		var resp map[string]any
		if err := json.Unmarshal(lines.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := ask(missingResult)
	e, _ := resp["error"].(map[string]any)
	if e == nil || e["code"] != float64(mcp.INVALID_PARAMS) || !strings.Contains(e["message"].(string), `"result"`) || resp["id"] != float64(7) {
		t.Fatalf("answer %v", resp)
	}
	if resp := ask(`{"jsonrpc":"2.0","id":8,"method":"ping"}`); resp["id"] != float64(8) || resp["error"] != nil {
		t.Fatalf("ping: %v", resp)
	}
	if resp := ask(`{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"no_such_prompt"}}`); resp["error"] == nil {
		t.Fatalf("an unknown prompt: %v", resp)
	}
}

// TestPromptArgumentsOverClients: mcp-go's clients over stdio and
// streamable HTTP see invalid params (which they map from -32602 only).
func TestPromptArgumentsOverClients(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, c *client.Client) {
		t.Helper()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatal(err)
		}
		req := mcp.GetPromptRequest{}
		req.Params.Name = prompts.DebugName
		_, err := c.GetPrompt(ctx, req)
		if !errors.Is(err, mcp.ErrInvalidParams) || errors.Is(err, mcp.ErrInternalError) || !strings.Contains(err.Error(), `"result"`) {
			t.Fatalf("got %v, want invalid params naming result", err)
		}
		req.Params.Arguments = map[string]string{"result": `{"run_id":"r_1","status":"error","error":{"kind":"runtime","message":"x","hint":"y"}}`}
		if res, err := c.GetPrompt(ctx, req); err != nil || len(res.Messages) != 1 {
			t.Fatalf("a good call: %v", err)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = bare(promptServer()).ServeStdio(sctx, inR, outW) }()
		c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))))
		defer c.Close()
		check(t, c)
	})
	t.Run("streamable http", func(t *testing.T) {
		h, shutdown := bare(promptServer()).Handler(HTTPConfig{Transport: TransportHTTP, Addr: "127.0.0.1:0", Logger: discard()})
		defer shutdown(ctx)
		srv := httptest.NewServer(h)
		defer srv.Close()
		tr, err := transport.NewStreamableHTTP(srv.URL + PathMCP)
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr)
		defer c.Close()
		check(t, c)
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// bare serves s as a Server with no runbox tools and no Tasks extension.
func bare(s *server.MCPServer) *Server {
	return &Server{mcp: s, m: manifest.Default(), logger: discard(), tasks: passThrough{}}
}

// passThrough is a tasksLayer that serves no tasks: every message passes.
type passThrough struct{}

func (passThrough) stdio(w io.Writer) (func([]byte, io.Writer) []byte, io.Writer) {
	return func([]byte, io.Writer) []byte { return nil }, w
}
func (passThrough) http(next http.Handler) http.Handler                         { return next }
func (passThrough) sse(_ *server.SSEServer, messages http.Handler) http.Handler { return messages }
func (passThrough) sseEvents(events http.Handler) http.Handler                  { return events }
func (passThrough) close()                                                      {}
