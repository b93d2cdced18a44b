//go:build linux

package boxinit

import (
	"context"
	"embed"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

//go:embed lib/runbox_tools.py lib/runbox_tools.js lib/runbox_tools.mjs lib/register.mjs
var libraries embed.FS

// Bounds of one call as runbox-init carries it; the server's per-run
// bounds are smaller.
const (
	maxToolRequest = 64 << 20
	maxToolAnswer  = 512 << 20
	// maxToolConns bounds the code's connections served at once; more
	// wait in the listener's backlog.
	maxToolConns = 64
)

// writeLibraries puts the in-box libraries where the interpreters find
// them (PYTHONPATH and NODE_PATH name dir when the manifest has servers).
// They come with runbox-init, never from the image, and only into boxes
// whose code may call tools: before a pooled box's interpreter starts
// (its import path must see the directory), else before the program.
func writeLibraries(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := libraries.ReadDir("lib")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := libraries.ReadFile("lib/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// toolCalls is the service that carries the code's tool calls: it listens
// on a unix socket in the box and carries each connection's request to
// the host on a StreamTool stream, and the answer back.
type toolCalls struct {
	socket, lib string
}

// Start listens when the server serves tool calls for this job.
func (t toolCalls) Start(ctx context.Context, host *Host, job *initproto.Job) (func(), error) {
	if host == nil || !slices.Contains(job.Streams, initproto.StreamTool) {
		return func() {}, nil
	}
	if err := writeLibraries(t.lib); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(t.socket), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(t.socket)
	l, err := net.Listen("unix", t.socket)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	slots := make(chan struct{}, maxToolConns)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				carry(ctx, host, c)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	return func() {
		cancel()
		_ = l.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
		_ = os.Remove(t.socket)
	}, nil
}

// carry serves one connection: the request (everything until the code
// half-closes), the host's answer, then the end.
func carry(ctx context.Context, host *Host, c net.Conn) {
	defer c.Close()
	req, err := io.ReadAll(io.LimitReader(c, maxToolRequest+1))
	if err != nil {
		return
	}
	if len(req) > maxToolRequest {
		_, _ = c.Write([]byte(`{"ok":false,"error":{"kind":"limit","message":"a tool call's arguments larger than runbox carries"}}`))
		return
	}
	hs, err := host.Open(ctx, initproto.StreamTool, nil, req)
	if err != nil {
		_, _ = c.Write([]byte(`{"ok":false,"error":{"kind":"upstream","message":"the host cannot be reached"}}`))
		return
	}
	defer hs.Close()
	// Stopping the service (the program ended) abandons a call still
	// waiting for its answer; the server cancels it upstream as the run ends.
	defer context.AfterFunc(ctx, func() { _ = hs.st.SetReadDeadline(time.Now()) })()
	_ = hs.CloseWrite()
	var body struct{}
	blobs, err := initproto.Receive(hs, &body, maxToolAnswer)
	if err != nil || len(blobs) != 1 {
		if errors.Is(err, initproto.ErrTooLarge) {
			_, _ = c.Write([]byte(`{"ok":false,"error":{"kind":"limit","message":"a tool's answer larger than runbox carries"}}`))
		} else {
			_, _ = c.Write([]byte(`{"ok":false,"error":{"kind":"upstream","message":"the host ended the call"}}`))
		}
		return
	}
	_, _ = c.Write(blobs[0])
}
