package sandbox

import (
	"context"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// RunRequest is one run: its job and what the call brings to it besides
// (the manifest brings the rest). Nothing a run needs travels in its
// context.
type RunRequest struct {
	Job contract.Job
	// Mounts are host folders the box sees read-only besides the
	// manifest's (a client's roots). A run with mounts of its own never
	// takes a pooled box (the pool's boxes have only the manifest's
	// folders) nor a cached answer. A session's cell has the folders its
	// session opened with ([SessionRequest].Mounts): RunInSession
	// ignores these.
	Mounts []HostMount
	// Streams serve the streams the box opens for the code (its tool
	// calls: upstream.Run.Streams); nil serves none. They are per run
	// because what they allow (policy, the client to ask) is the calling
	// request's. The run's proxied connections are served besides them
	// ([Options].Network). A run with streams is never answered from the
	// [Cache].
	Streams *initproto.Streams
	// Approve is asked, by the run's network, whether the run may connect
	// to an approve: ask endpoint; nil refuses those.
	Approve Approver
	// OnSent, when set, is called once, synchronously, just before the job
	// is sent to its box (a one-off run, pooled or cold, or a session's
	// cell), with what a restarted server needs to find the run again
	// ([Runner].Adopt). It must be quick: the call waits for it. A run
	// answered without a box (the [Cache], a refusal) never calls it.
	OnSent func(Detached)
}

// Runner runs jobs in boxes.
type Runner interface {
	// Run runs one job in a fresh box and always returns a result:
	// failures of the engine are results of kind sandbox, not errors.
	Run(ctx context.Context, req RunRequest) contract.Result
	// Peek is the output so far of run id (a one-off run or a session's
	// cell) while it runs, within PeekWait; false when it is not known
	// (no such run going on now, or its box did not answer in time).
	Peek(ctx context.Context, id string) (Peek, bool)
	// Sessions is the runner that keeps its sessions, or nil when it
	// keeps none.
	Sessions() SessionRunner
	// Close releases the runner; boxes still running are killed.
	Close() error
	// Adopt finds the box of a run a dead server sent ([RunRequest].OnSent)
	// and returns the run's result, waiting for its end (bounded by its
	// timeout from when it was sent); ctx cancelled cancels the run. A run
	// whose box is gone answers a sandbox result saying its result is lost
	// (contract.RunLost). It never hangs.
	Adopt(ctx context.Context, d Detached) contract.Result
	// MarkKept marks the box of a run whose record the caller's store now
	// keeps ([Driver].MarkKept), so that a server of another state directory on the
	// same engine does not reap it once its server is gone. It returns at
	// once; a mark that fails is logged (the box is then reaped as any
	// dead server's, and a restarted server answers its run lost).
	MarkKept(boxID string)
}
