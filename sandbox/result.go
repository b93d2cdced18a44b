package sandbox

import (
	"context"

	"github.com/runbox-mcp/runbox/contract"
)

// Runner runs jobs in boxes.
type Runner interface {
	// Run runs one job in a fresh box and always returns a result:
	// failures of the engine are results of kind sandbox, not errors.
	Run(ctx context.Context, job contract.Job) contract.Result
	// Sessions is the runner that keeps its sessions, or nil when it
	// keeps none.
	Sessions() SessionRunner
	// Close releases the runner; boxes still running are killed.
	Close() error
}
