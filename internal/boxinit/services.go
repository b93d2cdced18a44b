//go:build linux

package boxinit

import (
	"context"
	"fmt"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// Service runs beside a job's program, for box-side code that reaches the
// host through [Host] (the code's tool calls, its proxied connections).
// Start is called before the program starts and must not block; the stop
// it returns is called once the program has ended, before the report is
// sent. A service that has nothing to do for a job returns a no-op stop.
// A pooled box's interpreter started before its job: what the program
// needs to find a service (a socket's path) must not depend on the job.
type Service interface {
	Start(ctx context.Context, host *Host, job *initproto.Job) (stop func(), err error)
}

// services are the box-side services runbox-init runs for every job.
func services() []Service {
	return []Service{toolCalls{socket: initproto.ToolsSocket, lib: initproto.ToolsLib}, networkService{}}
}

// startServices starts opts' services; the stop returned stops those
// started, in reverse order.
func startServices(ctx context.Context, opts Options, job *initproto.Job) (func(), error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, s := range opts.Services {
		stop, err := s.Start(ctx, opts.Host, job)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("starting a box service: %w", err)
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}
