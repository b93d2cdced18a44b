package runs

import (
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/upstream"
)

// ToolCallMetrics counts the code's calls to upstream tools.
type ToolCallMetrics interface {
	ObserveToolCall(server, outcome string, d time.Duration)
}

// argsHeadBytes is how much of a call's arguments the audit log keeps.
const argsHeadBytes = 256

// toolCalls lets a run's code call the upstream servers: streams are the
// run's handlers (nil without servers); calls returns the audit of the
// calls made and how many values it redacted. The handlers serve under
// the run's context, the run_code call's: Ask asks its client.
func (d Service) toolCalls() (*initproto.Streams, func() ([]audit.ToolCall, int)) {
	if d.Upstream == nil || len(d.Upstream.Servers()) == 0 {
		return nil, func() ([]audit.ToolCall, int) { return nil, 0 }
	}
	var mu sync.Mutex
	var calls []audit.ToolCall
	redacted := 0
	observe := func(r upstream.Record) {
		head := string(r.Args)
		if len(head) > argsHeadBytes {
			head = cut(head, argsHeadBytes) + "…"
		}
		head, n := audit.Redact(head)
		mu.Lock()
		redacted += n
		calls = append(calls, audit.ToolCall{Server: r.Server, Tool: r.Tool, ArgsHead: head, DurationMs: r.Duration.Milliseconds(),
			Outcome: r.Outcome, BytesIn: r.BytesIn, BytesOut: r.BytesOut})
		mu.Unlock()
		if d.ToolMetrics != nil {
			// A name no server has is the code's own: one label for all,
			// or code could grow the metrics without bound.
			srv := r.Server
			if r.Outcome == upstream.KindUnknownServer || d.Upstream.Server(srv) == nil {
				srv = "(unknown)"
			}
			d.ToolMetrics.ObserveToolCall(srv, r.Outcome, r.Duration)
		}
	}
	run := d.Upstream.NewRun(d.Manifest.ToolCalls, d.Ask, observe)
	return run.Streams(), func() ([]audit.ToolCall, int) {
		mu.Lock()
		defer mu.Unlock()
		return calls, redacted
	}
}
