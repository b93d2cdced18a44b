package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/upstream"
)

// upstreamWait bounds the wait at start-up for the servers' first tool
// lists, which the run_code description counts; a slower server is
// counted once it answers.
const upstreamWait = 10 * time.Second

// startUpstream connects the manifest's servers (nil when there are none).
func startUpstream(ctx context.Context, m *manifest.Manifest, logger *slog.Logger) *upstream.Set {
	if len(m.Servers) == 0 {
		return nil
	}
	set := upstream.NewSet(m.Servers, upstream.Options{Logger: logger})
	set.Start()
	wait, cancel := context.WithTimeout(ctx, upstreamWait)
	defer cancel()
	set.Ready(wait)
	return set
}
