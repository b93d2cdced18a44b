package upstream

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

// Options configure a Set.
type Options struct {
	// Logger reports connections and their loss; default: discard.
	Logger *slog.Logger
	// Getenv reads the host variables the manifest names; default
	// os.Getenv.
	Getenv func(string) string
}

// Set is runbox's connections to the manifest's servers.
type Set struct {
	servers []*Server
	life    context.Context
	stop    context.CancelFunc

	mu      sync.Mutex
	onTools []func()
}

// NewSet prepares the servers; nothing connects before Start or a use.
func NewSet(servers []manifest.Server, o Options) *Set {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	life, stop := context.WithCancel(context.Background())
	s := &Set{life: life, stop: stop}
	for _, cfg := range servers {
		s.servers = append(s.servers, &Server{cfg: cfg, log: o.Logger, getenv: o.Getenv, life: life, changed: s.toolsChanged})
	}
	return s
}

// Start connects, in the background, the servers to connect at start-up.
func (s *Set) Start() {
	for _, srv := range s.servers {
		if srv.cfg.Connect != manifest.ConnectFirstUse {
			go func() {
				if _, err := srv.conn(s.life); err != nil {
					srv.log.Warn("upstream server not reachable; tried again on first use", "server", srv.cfg.Name, "err", err)
				}
			}()
		}
	}
}

// Ready waits until every start-up server has connected or failed once.
func (s *Set) Ready(ctx context.Context) {
	for _, srv := range s.servers {
		if srv.cfg.Connect != manifest.ConnectFirstUse {
			_, _ = srv.conn(ctx)
		}
	}
}

// Servers are the servers in manifest order.
func (s *Set) Servers() []*Server {
	if s == nil {
		return nil
	}
	return s.servers
}

// Server finds a server by its name or its name as code spells it.
func (s *Set) Server(name string) *Server {
	for _, srv := range s.servers {
		if srv.cfg.Name == name || Identifier(srv.cfg.Name) == name {
			return srv
		}
	}
	return nil
}

// OnToolsChanged registers f, called when a server's tools are first
// listed or change.
func (s *Set) OnToolsChanged(f func()) {
	s.mu.Lock()
	s.onTools = append(s.onTools, f)
	s.mu.Unlock()
}

func (s *Set) toolsChanged() {
	s.mu.Lock()
	fs := slices.Clone(s.onTools)
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Close ends every connection and stops the stdio servers.
func (s *Set) Close() {
	if s == nil {
		return
	}
	s.stop()
	for _, srv := range s.servers {
		srv.close()
	}
}

// Identifier is a name as code spells it: every character that cannot be
// in an identifier (- and . among them) reads as _, and a leading digit
// gets a _ before it.
func Identifier(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// findTool finds a tool by its name or its name as code spells it.
func findTool(tools []mcp.Tool, name string) (mcp.Tool, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	for _, t := range tools {
		if Identifier(t.Name) == name {
			return t, true
		}
	}
	return mcp.Tool{}, false
}
