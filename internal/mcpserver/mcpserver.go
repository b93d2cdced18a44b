package mcpserver

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/metrics"
	"github.com/runbox-mcp/runbox/prompts"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/inflight"
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
	// Runs keeps the long runs and tasks so that they outlive the process,
	// the runner adopting a kept run's box in a restarted server; nil
	// keeps them in memory only.
	Runs *runstore.Store
	// Described delivers the manifest again, as the images describe their
	// languages (versions, packages): run_code's description, the prompts
	// and the manifest resource follow each one. nil: the loaded
	// manifest's descriptions stay.
	Described <-chan *manifest.Manifest
}

// Server is runbox's MCP server: mcp-go's server with every runbox tool
// registered, the long runs' registry and the Tasks extension's layer in
// front of it. It serves one transport (ServeStdio, ServeHTTP or Handler)
// and stops its runs on Close.
type Server struct {
	mcp    *server.MCPServer
	m      *manifest.Manifest
	logger *slog.Logger
	// inFlight are the runs in flight (long runs, tasks' runs); nil for
	// a server without runbox's tools.
	inFlight *inflight.Registry
	tasks    tasksLayer

	closeOnce sync.Once
}

// tasksLayer serves the Tasks extension around mcp-go's transports. The
// layer of tasks*.go does it in front of mcp-go today; once an mcp-go
// release serves SEP-2663 itself, an implementation that passes every
// message through takes its place, and nothing else changes.
type tasksLayer interface {
	// stdio serves one stdio connection, whose answers go to w, each a
	// whole line: line answers a line of the client's that the layer
	// serves (nil: mcp-go's, to which the layer may hand lines of its
	// own, toMCP), and out is what mcp-go writes to in place of w.
	stdio(w io.Writer) (line func(line []byte, toMCP io.Writer) []byte, out io.Writer)
	http(next http.Handler) http.Handler
	sse(srv *server.SSEServer, messages http.Handler) http.Handler
	sseEvents(events http.Handler) http.Handler
	// close ends every task's call that runs here.
	close()
}

// New returns the MCP server with every runbox tool registered.
func New(m *manifest.Manifest, r sandbox.Runner, o Options) *Server {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// List changes are always possible: the images' probes (Options.Described)
	// change run_code's description after the server answers.
	opts := upstreamOptions(o)
	// The Tasks extension (tasks.go) is served on every transport: stdio,
	// streamable HTTP and SSE (tasks_sse.go).
	opts = append(opts, server.WithExtensions(map[string]any{ExtensionTasks: map[string]any{}}))
	info := implementation(o.Version)
	s := server.NewMCPServer(info.Name, info.Version, append(opts,
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(true),
		server.WithRecovery(),
		// A large call's arguments reach its handler from the HTTP layer
		// in front of mcp-go (parked.go), not through mcp-go's copies.
		server.WithToolHandlerMiddleware(parkedArguments),
		server.WithLogger(logger),
		server.WithInstructions(instructions(m)),
		server.WithToolFilter(tools.ToolsForClient),
		server.WithToolFilter(tools.ViewForClient),
		server.WithIcons(info.Icons...),
		server.WithTitle(info.Title),
	)...)
	store := runs.NewArtifactStore(m.Artifacts.TTL(), int64(m.Artifacts.StoreBytes))
	deps := tools.Deps{Service: runs.Service{Manifest: m, Runner: r, Budgets: runs.NewBudgets(m.Budgets),
		Audit: o.Audit, Transport: o.Transport, Logger: logger, Metrics: o.Metrics, Ask: tools.Elicit}, Store: store}
	var bm inflight.BackgroundMetrics
	if o.Metrics != nil {
		bm = o.Metrics
	}
	deps.InFlight = inflight.New(deps.Service, store, bm)
	if o.Runs != nil {
		deps.InFlight.Durable(o.Runs, r)
	}
	if hasUpstream(o) {
		deps.Upstream = o.Upstream
		if o.Metrics != nil {
			deps.ToolMetrics = o.Metrics
		}
	}
	deps.Exposures = exposures(m, r, o)
	if deps.Exposures != nil {
		o.Metrics.WatchExposures(deps.Exposures)
	}
	d := &described{s: s, deps: deps, m: m}
	d.register(m)
	if hasUpstream(o) {
		s.AddTools(tools.SearchTools(o.Upstream))
		o.Upstream.OnToolsChanged(d.again)
	}
	s.AddTools(tools.SessionTools(deps)...)
	s.AddTools(tools.CheckpointTools(deps)...)
	s.AddTools(tools.WorkspaceTools(deps)...)
	s.AddTools(tools.ExposeTools(deps.Exposures)...)
	s.AddTools(tools.RunHandleTools(deps)...)
	// The tools whose calls never run as tasks: every built-in but
	// run_code (tasks.go).
	builtins := map[string]bool{tools.SaveToolName: true, tools.DeleteToolName: true}
	for name := range s.ListTools() {
		builtins[name] = true
	}
	// Last: every tool registered before the saved ones is a built-in,
	// which no saved tool may shadow or delete.
	addSaved(s, m, deps, o)
	layer := newTaskLayer(s, m, builtins, logger, o.Runs, deps, info)
	mr := tools.ManifestResource(d.current)
	s.AddResource(mr.Resource, mr.Handler)
	vr := tools.ViewResource()
	s.AddResource(vr.Resource, vr.Handler)
	at := tools.ArtifactTemplate(store, m)
	s.AddResourceTemplate(at.Template, at.Handler)
	st := tools.StreamTemplate(store, m)
	s.AddResourceTemplate(st.Template, st.Handler)
	dt := tools.DisplayTemplate(store, m)
	s.AddResourceTemplate(dt.Template, dt.Handler)
	if log := tools.CellLogOf(deps); log != nil {
		ct := tools.SessionCellsTemplate(log)
		s.AddResourceTemplate(ct.Template, ct.Handler)
	}
	if o.Described != nil {
		go func() {
			for dm := range o.Described {
				d.register(dm)
			}
		}()
	}
	return &Server{mcp: s, m: m, logger: logger, inFlight: deps.InFlight, tasks: layer}
}

// implementation is the server as it names itself: in initialize, and in
// the _meta of every result of protocol 2026-07-28 (mcp-go's, and a task's
// result rendered by the task layer).
func implementation(version string) mcp.Implementation {
	return mcp.Implementation{Name: Name, Version: version, Title: "runbox: run code in a sandbox", Icons: tools.Icons}
}

// MCP is mcp-go's server, for an in-process client.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// Close stops the server's tasks and its background runs (their boxes are
// killed) and writes the audit lines of those nobody collected: when it
// stops serving. Closing again does nothing.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.tasks.close()
		if s.inFlight != nil {
			s.inFlight.Close()
		}
	})
}

// described holds the manifest as the agent is told it: the loaded one,
// then the same with each language's version and packages as its image
// reports them. The tools, prompts and resource that describe the sandbox
// are registered again from it whenever it, or the upstream servers'
// tools, change. Limits are the same in both: only descriptions differ.
type described struct {
	s    *server.MCPServer
	deps tools.Deps

	mu sync.Mutex
	m  *manifest.Manifest
}

func (d *described) register(m *manifest.Manifest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m = m
	deps := d.deps
	deps.Manifest = m
	d.s.AddTools(tools.RunCode(deps))
	d.s.AddPrompts(prompts.All(m)...)
}

// again registers the description anew: the upstream servers' tools,
// which run_code's description lists, changed.
func (d *described) again() { d.register(d.current()) }

func (d *described) current() *manifest.Manifest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m
}

// ServeStdio serves s on in/out until in closes or ctx ends, then closes
// s. Tool calls run concurrently; the runner's own queue bounds them.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	workers := min(s.m.Concurrency+s.m.QueueSize+1, 100)
	stdio := server.NewStdioServer(s.mcp)
	server.WithWorkerPoolSize(workers)(stdio)
	server.WithQueueSize(workers * 2)(stdio)
	stdio.SetErrorLogger(log.New(slogWriter{s.logger}, "", 0))
	in, out = s.stdioLayers(ctx, in, out)
	defer s.Close()
	err := stdio.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stdioLayers puts runbox's layers between the client and mcp-go on the
// stdio transport, in one pass over each line (one goroutine between the
// client and mcp-go, not one a layer): the params guard answers the
// prompts/get requests it refuses, then the task layer those it serves;
// every other line goes on to the returned reader. Their answers go to
// out whole, one line at a time, so they never interleave with mcp-go's,
// which writes to the returned writer.
func (s *Server) stdioLayers(ctx context.Context, in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	lw := &lineWriter{w: out}
	tasksLine, toClient := s.tasks.stdio(lw)
	guard := paramsGuard{s.mcp}
	return filterLines(in, lw, func(line []byte, toMCP io.Writer) []byte {
		if resp := guard.refusal(ctx, line); resp != nil {
			return resp
		}
		return tasksLine(line, toMCP)
	}), toClient
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
	return "runbox runs Python, JavaScript, TypeScript and bash in an isolated sandbox " + network + ". Call run_code to execute code and read its structured result; the tool description lists the limits and installed packages."
}
