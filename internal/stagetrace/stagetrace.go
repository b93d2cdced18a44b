// Package stagetrace times the stages of one call, on the host and in the
// box, when RUNBOX_TRACE_STAGES is set in the server's environment: a
// debug aid for `go run ./bench --only cells`, which prints where a
// session cell's time goes. Off (the default), a call carries no trace
// and every mark is a nil check. It knows nothing of MCP or engines.
package stagetrace

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Env is the environment variable that turns tracing on.
const Env = "RUNBOX_TRACE_STAGES"

var enabled = os.Getenv(Env) != ""

// Trace is one call's marks, in the order they were made.
type Trace struct {
	mu    sync.Mutex
	marks []initproto.Mark
}

// Start is a new trace whose first mark is stage, or nil when tracing is
// off.
func Start(stage string) *Trace {
	if !enabled {
		return nil
	}
	t := &Trace{}
	t.Mark(stage)
	return t
}

// Mark notes that stage ended now; a nil trace notes nothing.
func (t *Trace) Mark(stage string) {
	if t == nil {
		return
	}
	t.Add(initproto.Mark{Stage: stage, At: time.Now().UnixNano()})
}

// Add notes marks made elsewhere (the box's, by the same kernel's clock).
func (t *Trace) Add(marks ...initproto.Mark) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.marks = append(t.marks, marks...)
	t.mu.Unlock()
}

// Log writes the trace as one record: each stage with the microseconds
// since the mark before it, and the whole span.
func (t *Trace) Log(log *slog.Logger, runID string) {
	if t == nil || log == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.marks) == 0 {
		return
	}
	// Marks come from goroutines and the box: in the order they were made.
	slices.SortStableFunc(t.marks, func(a, b initproto.Mark) int { return cmp.Compare(a.At, b.At) })
	attrs := []any{"run_id", runID, "span_us", (t.marks[len(t.marks)-1].At - t.marks[0].At) / 1000}
	stages := make([]any, 0, len(t.marks)-1)
	for i := 1; i < len(t.marks); i++ {
		stages = append(stages, slog.Int64(t.marks[i].Stage, (t.marks[i].At-t.marks[i-1].At)/1000))
	}
	log.Info("stages", append(attrs, slog.Group("us", stages...))...)
}

type key struct{}

// With is ctx carrying t.
func With(ctx context.Context, t *Trace) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, t)
}

// From is the trace ctx carries, nil when none.
func From(ctx context.Context) *Trace {
	if !enabled {
		return nil
	}
	t, _ := ctx.Value(key{}).(*Trace)
	return t
}
