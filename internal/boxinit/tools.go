//go:build linux

package boxinit

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	budget := newToolBudget(job.StreamBudgets[initproto.StreamTool])
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
				carry(ctx, host, c, budget)
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

// Framing a tool stream adds to its request, counted against the budget
// per stream: the header line, generously.
const toolFraming = 256

// Room apart from the budget for the notes of refused calls, so the
// server still records them once the calls spent the budget; a note's
// names are cut to maxNoteName bytes.
const (
	maxRefusalNotes = 512 << 10
	maxNoteName     = 256
	// maxNoteHead is how much of a refused request is kept to find its
	// names in.
	maxNoteHead = 64 << 10
)

// toolBudget is what the run's tool calls may still send to the host
// (Job.StreamBudgets[tool]): a call past it is refused here, with a note
// to the host, and never sent, so the server never kills the box for it.
// Requests take from it as they are read, so the requests held at once
// are bounded by it too.
type toolBudget struct {
	mu          sync.Mutex
	left, notes int64
}

// newToolBudget is a budget of max bytes; 0 (no budget in the job) is
// bounded by maxToolRequest per call alone.
func newToolBudget(max int64) *toolBudget {
	if max <= 0 {
		max = 1 << 62
	}
	return &toolBudget{left: max, notes: maxRefusalNotes}
}

// take spends n bytes of the budget (of the notes' room for a note), or
// says no.
func (b *toolBudget) take(n int64, note bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	left := &b.left
	if note {
		left = &b.notes
	}
	if n > *left {
		return false
	}
	*left -= n
	return true
}

// give returns n bytes taken for a request that was not sent.
func (b *toolBudget) give(n int64) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// carry serves one connection: the request (everything until the code
// half-closes), the host's answer, then the end. A request past the
// budget (or maxToolRequest) is read to its end and dropped (the code's
// send completes and it reads its answer), and answered as a limit error.
func carry(ctx context.Context, host *Host, c net.Conn, budget *toolBudget) {
	defer c.Close()
	req, size, over, err := readRequest(c, budget)
	if err != nil {
		return
	}
	if over {
		_, _ = c.Write(refuseCall(ctx, host, req, size, budget))
		return
	}
	a, _ := callHost(ctx, host, nil, req)
	_, _ = c.Write(a)
}

// readRequest reads a request to its end, taking from the budget as it
// goes (toolFraming first). Past the budget or maxToolRequest (over) it
// gives back what it took, keeps only the head (maxNoteHead, to name the
// call in the note) and counts the rest: size is the request's.
func readRequest(c io.Reader, budget *toolBudget) (req []byte, size int64, over bool, err error) {
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	var taken int64
	if budget.take(toolFraming, false) {
		taken = toolFraming
	} else {
		over = true
	}
	for {
		n, rerr := c.Read(chunk)
		size += int64(n)
		if n > 0 && !over && (buf.Len()+n > maxToolRequest || !budget.take(int64(n), false)) {
			over = true
			budget.give(taken)
			taken = 0
		}
		switch {
		case n > 0 && !over:
			taken += int64(n)
			buf.Write(chunk[:n])
		case n > 0 && buf.Len() < maxNoteHead:
			buf.Write(chunk[:min(n, maxNoteHead-buf.Len())])
		}
		if errors.Is(rerr, io.EOF) {
			if over && buf.Len() > maxNoteHead {
				buf.Truncate(maxNoteHead)
			}
			return buf.Bytes(), size, over, nil
		}
		if rerr != nil {
			budget.give(taken)
			return nil, 0, false, rerr
		}
	}
}

// refuseCall answers a call too large to send: the host records it from a
// note of its names and size, and answers; when even the note cannot go,
// runbox-init answers alone.
func refuseCall(ctx context.Context, host *Host, head []byte, size int64, budget *toolBudget) []byte {
	op, server, tool := callNames(head)
	note, _ := json.Marshal(map[string]string{"op": op, "server": server, "tool": tool})
	if budget.take(int64(len(note))+toolFraming, true) {
		if a, ok := callHost(ctx, host, map[string]int64{"refused_bytes": size}, note); ok {
			return a
		}
	}
	a, _ := json.Marshal(map[string]any{"ok": false, "error": map[string]string{"kind": "limit", "server": server, "tool": tool,
		"message": fmt.Sprintf("the call's %d bytes of arguments pass what this run's tool calls may still send", size)}})
	return a
}

// callHost carries one request to the host and returns the answer the
// code reads; ok says it is the host's.
func callHost(ctx context.Context, host *Host, data any, req []byte) (a []byte, ok bool) {
	hs, err := host.Open(ctx, initproto.StreamTool, data, req)
	if err != nil {
		return []byte(`{"ok":false,"error":{"kind":"upstream","message":"the host cannot be reached"}}`), false
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
			return []byte(`{"ok":false,"error":{"kind":"limit","message":"a tool's answer larger than runbox carries"}}`), false
		}
		return []byte(`{"ok":false,"error":{"kind":"upstream","message":"the host ended the call"}}`), false
	}
	return blobs[0], true
}

// callNames reads the op, server and tool of a request from its head
// (the libraries send them before the arguments; a head cut short, or
// not JSON, gives what it has), each cut to maxNoteName bytes.
func callNames(head []byte) (op, server, tool string) {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", "", ""
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			break
		}
		key, _ := k.(string)
		if key == "args" {
			break
		}
		v, err := d.Token()
		if err != nil {
			break
		}
		if _, delim := v.(json.Delim); delim {
			break
		}
		val, _ := v.(string)
		if len(val) > maxNoteName {
			val = strings.ToValidUTF8(val[:maxNoteName], "")
		}
		switch key {
		case "op":
			op = val
		case "server":
			server = val
		case "tool":
			tool = val
		}
	}
	return op, server, tool
}
