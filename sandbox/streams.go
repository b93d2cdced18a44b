package sandbox

import (
	"context"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

type streamsKey struct{}

// WithStreams returns a context under which a [BoxRunner] run serves the
// streams its box opens with s. Handlers are per run because what they
// allow (policy, the client to ask) is the calling request's. A run with
// streams is never answered from the [Cache].
func WithStreams(ctx context.Context, s *initproto.Streams) context.Context {
	return context.WithValue(ctx, streamsKey{}, s)
}

// StreamsFrom returns the streams WithStreams put in ctx, or nil.
func StreamsFrom(ctx context.Context) *initproto.Streams {
	s, _ := ctx.Value(streamsKey{}).(*initproto.Streams)
	return s
}

// budgets are the kinds' budgets for the job; nil for nil.
func budgets(s *initproto.Streams) map[string]int64 {
	if s == nil {
		return nil
	}
	return s.Budgets
}
