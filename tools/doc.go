// Package tools holds runbox's MCP tools as data: each tool value carries
// its definition (schemas reflected from Go types, description rendered from
// the manifest, explicit annotations) and its handler.
//
// The run_code pipeline is the run service's (package runs: Service.Run
// over a typed Call), which Deps embeds. The run_code handler and every
// saved tool call it after settling the call's input requests (roots,
// approvals, who calls), and turn its contract.Result into a
// CallToolResult. Around it for MCP calls, the run handle (runwait.go):
// a run still going after limits.answer_within_seconds answers status
// running and goes on; run_wait collects it, run_cancel stops it. The
// registry of runs in flight (runs/inflight) does the work below MCP: it
// caps long runs (those, and calls made as MCP tasks), keeps their results
// and their records in the run store, and adopts a restarted server's
// runs; this package reads a call's bound and task from the request and
// renders the answers, a task's result included when the task layer
// collects it (taskruns.go). Every failure an agent can fix, bad arguments
// included, is a result with isError and a typed error.kind, never a
// protocol error. The package knows nothing of Docker or Kubernetes: it
// runs calls through a sandbox.Runner, and treats the manifest as
// read-only.
package tools
