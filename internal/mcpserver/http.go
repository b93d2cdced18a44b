package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// Paths on the HTTP listener.
const (
	PathMCP     = "/mcp"     // streamable HTTP
	PathSSE     = "/sse"     // SSE stream (legacy transport)
	PathMessage = "/message" // SSE client-to-server messages
	PathHealth  = "/healthz"
)

// HTTPConfig configures the network transports.
type HTTPConfig struct {
	Transport string // http or sse
	// Addr is the listener's host:port; its origin (and, on loopback, the
	// localhost equivalents) may send an Origin header.
	Addr string
	// Token, when set, must come as "Authorization: Bearer <token>".
	Token string
	// Tokens are named tokens (name → value), each also accepted; the
	// name is the caller's principal (sessions, audit). Token, with
	// Tokens, is named "default".
	Tokens map[string]string
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed
	// besides the listener's own; any other Origin header gets 403.
	AllowedOrigins []string
	Logger         *slog.Logger
	// Metrics, when set, is served at /metrics: on MetricsAddr when that
	// is set (without the token: bind it where only scrapers reach), else
	// on the MCP listener behind the token.
	Metrics     http.Handler
	MetricsAddr string
	// Refused counts a connection or request the listener refused, by
	// reason; nil counts none.
	Refused func(reason string)
	// MaxRequestBytes bounds a request's body (0: the manifest's
	// default); MaxConnectionsPerAddress and MaxUnauthenticatedConnections
	// bound the connections held open (0: the manifest's defaults).
	MaxRequestBytes               int64
	MaxConnectionsPerAddress      int
	MaxUnauthenticatedConnections int
}

// withDefaults fills the bounds left zero with the manifest's defaults.
func (cfg HTTPConfig) withDefaults() HTTPConfig {
	d := manifest.Default().HTTP
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = int64(d.MaxRequestBytes)
	}
	if cfg.MaxConnectionsPerAddress <= 0 {
		cfg.MaxConnectionsPerAddress = d.MaxConnectionsPerAddress
	}
	if cfg.MaxUnauthenticatedConnections <= 0 {
		cfg.MaxUnauthenticatedConnections = d.MaxUnauthenticatedConnections
	}
	return cfg
}

// PathMetrics serves Prometheus metrics.
const PathMetrics = "/metrics"

// CheckListen refuses to expose code execution beyond this machine
// without a token.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && token == "" {
		return fmt.Errorf("--listen %s is reachable from other machines and anyone reaching it could run code: set --auth-token (or RUNBOX_AUTH_TOKEN)", addr)
	}
	return nil
}

// Handler returns the HTTP handler of a transport. Every MCP path checks
// the Origin header first, then the bearer token, then bounds the body;
// /healthz checks neither.
func (s *Server) Handler(cfg HTTPConfig) (http.Handler, func(context.Context) error) {
	cfg = cfg.withDefaults()
	return s.handler(cfg, cfg.Addr, newRefusals(cfg.Refused, cfg.Logger))
}

// handler is Handler for a listener bound to bound (host:port), whose
// origin is also the listener's own: the port of a :0 listener, the
// address a host name resolved to. f counts and logs what it refuses.
func (s *Server) handler(cfg HTTPConfig, bound string, f *refusals) (http.Handler, func(context.Context) error) {
	origins := newOriginPolicy([]string{cfg.Addr, bound}, cfg.AllowedOrigins, cfg.Logger)
	tokens := cfg.tokenSet()
	owners := newSessionOwners()
	guard := func(h http.Handler) http.Handler {
		return origins.guard(bearerNamed(tokens, f, bodyLimit(cfg.MaxRequestBytes, f, h)))
	}
	mux := http.NewServeMux()
	mux.HandleFunc(PathHealth, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if cfg.Metrics != nil && cfg.MetricsAddr == "" {
		mux.Handle(PathMetrics, bearerNamed(tokens, f, cfg.Metrics))
	}
	var shutdown func(context.Context) error
	switch cfg.Transport {
	case TransportSSE:
		sse := server.NewSSEServer(s.mcp, server.WithSSEEndpoint(PathSSE), server.WithMessageEndpoint(PathMessage), server.WithKeepAlive(true),
			server.WithSSEContextFunc(principalFromRequest), server.WithSessionIDGenerator(owners.sseID))
		var events, messages http.Handler = sse.SSEHandler(), paramsGuard{s.mcp}.sse(sse, argumentParking{parkAbove}.http(sse.MessageHandler()))
		events, messages = s.tasks.sseEvents(events), s.tasks.sse(sse, messages)
		shutdown = func(ctx context.Context) error { s.tasks.close(); return sse.Shutdown(ctx) }
		mux.Handle(PathSSE, guard(events))
		mux.Handle(PathMessage, guard(owners.sse(messages)))
	default:
		h := server.NewStreamableHTTPServer(s.mcp, server.WithEndpointPath(PathMCP), server.WithHTTPContextFunc(principalFromRequest),
			server.WithSessionIdManagerResolver(owners))
		mcpPath := s.tasks.http(paramsGuard{s.mcp}.http(argumentParking{parkAbove}.http(streamable{h})))
		shutdown = func(ctx context.Context) error { s.tasks.close(); return h.Shutdown(ctx) }
		mux.Handle(PathMCP, guard(owners.http(newCallerCancels().http(mcpPath))))
	}
	return guardStalls(mux), shutdown
}

// ServeHTTP serves the transport until ctx ends, then shuts down and
// closes s.
func (s *Server) ServeHTTP(ctx context.Context, cfg HTTPConfig) error {
	token := cfg.Token
	for _, v := range cfg.Tokens {
		token += v
	}
	if err := CheckListen(cfg.Addr, token); err != nil {
		return err
	}
	if err := CheckOrigins(cfg.AllowedOrigins); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	f := newRefusals(cfg.Refused, cfg.Logger)
	h, shutdownMCP := s.handler(cfg, ln.Addr().String(), f)
	unauthenticated := cfg.MaxUnauthenticatedConnections
	if cfg.tokenSet() == nil {
		unauthenticated = 0 // no token to show: no connection is unauthenticated
	}
	ln = newConnCaps(ln, cfg.MaxConnectionsPerAddress, unauthenticated, f)
	// No ReadTimeout or WriteTimeout: a body is given time by its size
	// (bodyLimit), and each write its own deadline (guardStalls), so that
	// a long answer or stream is never cut.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout, ConnContext: withConn}
	path := PathMCP
	if cfg.Transport == TransportSSE {
		path = PathSSE
	}
	cfg.Logger.Info("serving", "transport", cfg.Transport, "url", "http://"+ln.Addr().String()+path, "auth", cfg.Token != "", "allowed_origins", cfg.AllowedOrigins)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var msrv *http.Server
	if cfg.Metrics != nil && cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle(PathMetrics, cfg.Metrics)
		msrv = &http.Server{Handler: mux, ReadHeaderTimeout: headerTimeout, ReadTimeout: headerTimeout, WriteTimeout: headerTimeout, IdleTimeout: idleTimeout}
		cfg.Logger.Info("serving metrics", "url", "http://"+mln.Addr().String()+PathMetrics)
		go func() { errc <- msrv.Serve(mln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if msrv != nil {
		_ = msrv.Shutdown(sctx)
	}
	_ = shutdownMCP(sctx)
	s.Close()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
