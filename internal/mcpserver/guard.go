package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// paramsGuard answers a prompts/get whose arguments the prompt refuses
// (its handler's error wraps mcp.ErrInvalidParams) with -32602 invalid
// params, before mcp-go sees it: mcp-go v1.2 answers every prompt handler
// error -32603 (internal error), which tells a client the fault is the
// server's. The prompt's own handler decides, so the rules live in one
// place (package prompts); every other message passes untouched.
type paramsGuard struct {
	s *server.MCPServer
}

// refusal returns the JSON-RPC error response to msg, or nil to let
// mcp-go answer it.
func (g paramsGuard) refusal(ctx context.Context, msg []byte) []byte {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(msg, &req) != nil || req.Method != string(mcp.MethodPromptsGet) || len(req.ID) == 0 || len(req.Params) == 0 {
		return nil
	}
	var get mcp.GetPromptRequest
	if json.Unmarshal(req.Params, &get.Params) != nil {
		return nil
	}
	p := g.s.ListPrompts()[get.Params.Name]
	if p == nil || p.Handler == nil {
		return nil
	}
	_, err := p.Handler(ctx, get)
	if !errors.Is(err, mcp.ErrInvalidParams) {
		return nil
	}
	resp, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": req.ID,
		"error": map[string]any{"code": mcp.INVALID_PARAMS, "message": err.Error()}})
	return resp
}

// filterLines reads in line by line: a line answer answers is answered
// on lw, whole; any other goes on to the returned reader, which ends as
// in does. answer may write lines of its own to that reader (pw).
func filterLines(in io.Reader, lw *lineWriter, answer func(line []byte, pw io.Writer) []byte) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if resp := answer(line, pw); resp != nil {
					_, _ = lw.Write(append(resp, '\n'))
				} else if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// lineWriter serialises writes.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// maxGuardedBody bounds the body the guard reads on the HTTP transports;
// a larger one goes on to mcp-go unread by the guard.
const maxGuardedBody = 1 << 20

// http puts the guard in front of the streamable HTTP endpoint: a refused
// request is answered in the POST's own response.
func (g paramsGuard) http(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if resp := g.peek(r); resp != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(resp)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sse puts the guard in front of the SSE message endpoint: a refused
// request is answered on the session's event stream, as mcp-go answers.
func (g paramsGuard) sse(s *server.SSEServer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if resp := g.peek(r); resp != nil {
			if err := s.SendEventToSession(r.URL.Query().Get("sessionId"), json.RawMessage(resp)); err == nil {
				w.WriteHeader(http.StatusAccepted)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// peek reads a small POST body, as the listener holds it (bodyLimit).
func (g paramsGuard) peek(r *http.Request) []byte {
	body, ok := heldBytes(r)
	if r.Method != http.MethodPost || !ok || len(body) > maxGuardedBody {
		return nil
	}
	return g.refusal(r.Context(), body)
}
