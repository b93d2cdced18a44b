package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

// connectTimeout bounds starting a server and its first tools/list.
const connectTimeout = 30 * time.Second

// Server is one upstream server: its connection, made when first needed
// and again after it died, and its tools.
type Server struct {
	cfg    manifest.Server
	log    *slog.Logger
	getenv func(string) string
	// life is the connections' lifetime: a stdio server is a child process
	// that ends with it.
	life    context.Context
	changed func()

	mu      sync.Mutex
	client  *client.Client
	tools   []mcp.Tool
	lastErr error
	// connecting is closed when the connection under way is made or failed.
	connecting chan struct{}
	restarts   int
}

// Name is the server's name in the manifest.
func (s *Server) Name() string { return s.cfg.Name }

// Config is the server's manifest entry.
func (s *Server) Config() manifest.Server { return s.cfg }

// Restarts counts the connections made after the first.
func (s *Server) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// conn returns the server's client, connecting first when there is none.
func (s *Server) conn(ctx context.Context) (*client.Client, error) {
	for {
		s.mu.Lock()
		if s.client != nil {
			c := s.client
			s.mu.Unlock()
			return c, nil
		}
		wait := s.connecting
		if wait == nil {
			wait = make(chan struct{})
			s.connecting = wait
			s.mu.Unlock()
			c, tools, err := s.connect()
			s.mu.Lock()
			if err == nil {
				if s.lastErr != nil || s.tools != nil {
					s.restarts++
				}
				s.client, s.tools = c, tools
			}
			s.lastErr = err
			s.connecting = nil
			s.mu.Unlock()
			close(wait)
			if err != nil {
				return nil, err
			}
			if s.changed != nil {
				s.changed()
			}
			return c, nil
		}
		s.mu.Unlock()
		select {
		case <-wait:
			s.mu.Lock()
			c, err := s.client, s.lastErr
			s.mu.Unlock()
			if c == nil && err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// connect starts or reaches the server, initializes and lists its tools.
func (s *Server) connect() (*client.Client, []mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(s.life, connectTimeout)
	defer cancel()
	var c *client.Client
	if s.cfg.Command != "" {
		var env []string
		for _, k := range sortedKeys(s.cfg.Env) {
			env = append(env, k+"="+s.getenv(s.cfg.Env[k]))
		}
		t := transport.NewStdioWithOptions(s.cfg.Command, env, s.cfg.Args,
			transport.WithCommandFunc(func(_ context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
				// The process lives as long as runbox, not the call that
				// started it.
				cmd := exec.CommandContext(s.life, command, args...)
				cmd.Env = append(os.Environ(), env...)
				return cmd, nil
			}))
		c = client.NewClient(t)
	} else {
		headers := map[string]string{}
		for k, v := range s.cfg.Headers {
			headers[k] = s.getenv(v)
		}
		t, err := transport.NewStreamableHTTP(s.cfg.URL, transport.WithHTTPHeaders(headers), transport.WithContinuousListening())
		if err != nil {
			return nil, nil, err
		}
		c = client.NewClient(t)
	}
	if err := c.Start(s.life); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", s.cfg.Name, err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			go s.refresh(c)
		}
	})
	c.OnConnectionLost(func(error) { s.drop(c) })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("initializing %s: %w", s.cfg.Name, err)
	}
	tools, err := listTools(ctx, c)
	if err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("listing the tools of %s: %w", s.cfg.Name, err)
	}
	s.log.Info("upstream server connected", "server", s.cfg.Name, "tools", len(tools))
	return c, tools, nil
}

func listTools(ctx context.Context, c *client.Client) ([]mcp.Tool, error) {
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	tools := slices.Clone(res.Tools)
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools, nil
}

// refresh lists the tools again after the server said they changed.
func (s *Server) refresh(c *client.Client) {
	ctx, cancel := context.WithTimeout(s.life, connectTimeout)
	defer cancel()
	tools, err := listTools(ctx, c)
	if err != nil {
		s.log.Warn("upstream tools/list failed after list_changed", "server", s.cfg.Name, "err", err)
		return
	}
	s.mu.Lock()
	if s.client == c {
		s.tools = tools
	}
	s.mu.Unlock()
	if s.changed != nil {
		s.changed()
	}
}

// drop forgets a connection that failed, so the next use connects again.
func (s *Server) drop(c *client.Client) {
	s.mu.Lock()
	if s.client != c {
		s.mu.Unlock()
		return
	}
	s.client = nil
	s.mu.Unlock()
	s.log.Warn("upstream server lost; it is restarted on next use", "server", s.cfg.Name)
	go c.Close()
}

// Tools lists the server's tools, connecting first when needed.
func (s *Server) Tools(ctx context.Context) ([]mcp.Tool, error) {
	if _, err := s.conn(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools, nil
}

// Known is the tools last listed, without connecting.
func (s *Server) Known() []mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// Call calls a tool. A failure of the connection (the server died, it
// hung up) drops it: the next call starts the server again.
func (s *Server) Call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil && ctx.Err() == nil && connectionFailed(err) {
		s.drop(c)
	}
	return res, err
}

// connectionFailed says whether err means the connection is gone rather
// than that the server answered with an error.
func connectionFailed(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr)
}

// close ends the connection.
func (s *Server) close() {
	s.mu.Lock()
	c := s.client
	s.client = nil
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
