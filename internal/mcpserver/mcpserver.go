package mcpserver

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"

	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/metrics"
	"github.com/runbox-mcp/runbox/prompts"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/tools"
	"github.com/runbox-mcp/runbox/upstream"
)

// Name is the server's name in the MCP handshake.
const Name = "runbox"

// Options are what New needs besides the manifest and the runner.
type Options struct {
	Version   string
	Logger    *slog.Logger
	Transport string
	// Audit logs every call; nil logs none.
	Audit *audit.Log
	// Metrics counts every call; nil counts none.
	Metrics *metrics.Metrics
	// Upstream are the servers code may call; nil: none (upstream.go).
	Upstream *upstream.Set
}

// New returns the MCP server with every runbox tool registered.
func New(m *manifest.Manifest, r sandbox.Runner, o Options) *server.MCPServer {
	logger := o.Logger
	s := server.NewMCPServer(Name, o.Version, append(upstreamOptions(o),
		server.WithToolCapabilities(hasUpstream(o) || m.SavedTools.Enabled),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithRecovery(),
		server.WithLogger(logger),
		server.WithInstructions(instructions(m)),
	)...)
	store := tools.NewArtifactStore(m.Artifacts.TTL(), int64(m.Artifacts.StoreBytes))
	deps := tools.Deps{Manifest: m, Runner: r, Store: store, Budgets: tools.NewBudgets(m.Budgets),
		Audit: o.Audit, Transport: o.Transport, Logger: logger, Metrics: o.Metrics}
	s.AddTools(tools.RunCode(deps))
	addUpstream(s, deps, o)
	s.AddTools(tools.SessionTools(deps)...)
	// Last: every tool registered before the saved ones is a built-in,
	// which no saved tool may shadow or delete.
	addSaved(s, m, deps, o)
	s.AddResource(tools.ManifestResource(m).Resource, tools.ManifestResource(m).Handler)
	at := tools.ArtifactTemplate(store, m)
	s.AddResourceTemplate(at.Template, at.Handler)
	s.AddPrompts(prompts.All(m)...)
	return s
}

// ServeStdio serves s on in/out until in closes or ctx ends. Tool calls
// run concurrently; the runner's own queue bounds them.
func ServeStdio(ctx context.Context, s *server.MCPServer, m *manifest.Manifest, in io.Reader, out io.Writer, logger *slog.Logger) error {
	workers := min(m.Concurrency+m.QueueSize+1, 100)
	stdio := server.NewStdioServer(s)
	server.WithWorkerPoolSize(workers)(stdio)
	server.WithQueueSize(workers * 2)(stdio)
	stdio.SetErrorLogger(log.New(slogWriter{logger}, "", 0))
	in, out = paramsGuard{s}.stdio(ctx, in, out)
	err := stdio.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// slogWriter sends mcp-go's log.Logger lines to slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn("mcp", "msg", string(p))
	return len(p), nil
}

// instructions are the server's MCP instructions; the network clause
// follows the manifest.
func instructions(m *manifest.Manifest) string {
	network := "with no network"
	if m.Network.Enabled() {
		network = "that reaches only the network endpoints the tool description lists"
	}
	return "runbox runs Python, JavaScript and bash in an isolated sandbox " + network + ". Call run_code to execute code and read its structured result; the tool description lists the limits and installed packages."
}
