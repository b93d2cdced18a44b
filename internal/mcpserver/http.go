package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
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
	Addr      string
	// Token, when set, must come as "Authorization: Bearer <token>".
	Token  string
	Logger *slog.Logger
}

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

// Handler returns the HTTP handler of a transport, behind the bearer check.
func Handler(s *server.MCPServer, cfg HTTPConfig) (http.Handler, func(context.Context) error) {
	mux := http.NewServeMux()
	mux.HandleFunc(PathHealth, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	var shutdown func(context.Context) error
	switch cfg.Transport {
	case TransportSSE:
		sse := server.NewSSEServer(s, server.WithSSEEndpoint(PathSSE), server.WithMessageEndpoint(PathMessage), server.WithKeepAlive(true))
		mux.Handle(PathSSE, bearer(cfg.Token, sse.SSEHandler()))
		mux.Handle(PathMessage, bearer(cfg.Token, sse.MessageHandler()))
		shutdown = sse.Shutdown
	default:
		h := server.NewStreamableHTTPServer(s, server.WithEndpointPath(PathMCP))
		mux.Handle(PathMCP, bearer(cfg.Token, h))
		shutdown = h.Shutdown
	}
	return mux, shutdown
}

// ServeHTTP serves the transport until ctx ends, then shuts down.
func ServeHTTP(ctx context.Context, s *server.MCPServer, cfg HTTPConfig) error {
	if err := CheckListen(cfg.Addr, cfg.Token); err != nil {
		return err
	}
	h, shutdownMCP := Handler(s, cfg)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	path := PathMCP
	if cfg.Transport == TransportSSE {
		path = PathSSE
	}
	cfg.Logger.Info("serving", "transport", cfg.Transport, "url", "http://"+ln.Addr().String()+path, "auth", cfg.Token != "")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = shutdownMCP(sctx)
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bearer answers 401 unless the request carries the token.
func bearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runbox"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
