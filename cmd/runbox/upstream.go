package main

import (
	"context"
	"log/slog"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/upstream"
)

// startUpstream connects the manifest's servers (nil when there are none).
func startUpstream(ctx context.Context, m *manifest.Manifest, logger *slog.Logger) *upstream.Set {
	if len(m.Servers) == 0 {
		return nil
	}
	set := upstream.NewSet(m.Servers, upstream.Options{Logger: logger})
	// Connected beside serving, never before it: run_code's description
	// counts each server's tools once it answers (tools/list_changed), and
	// a call waits for a connection under way.
	set.Start()
	return set
}
