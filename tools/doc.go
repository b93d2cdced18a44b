// Package tools holds runbox's MCP tools as data: each tool value carries
// its definition (schemas reflected from Go types, description rendered from
// the manifest, explicit annotations) and its handler.
//
// The run_code pipeline is the run service's (package runs: Service.Run
// over a typed Call), which Deps embeds. The run_code handler and every
// saved tool call it after settling the call's input requests (roots,
// approvals, who calls), and turn its contract.Result into a
// CallToolResult. Around it for MCP calls, the run handle (runwait.go,
// handles.go): a run still going after limits.answer_within_seconds
// answers status running and goes on; run_wait collects it, run_cancel
// stops it; long runs (those, and calls made as MCP tasks) are capped per
// client and per server, and kept in the run store so that they outlive
// the process: a restarted server answers a finished one's result and
// adopts a running one through the runner (durable.go); a handle follows
// its run as the call's runs.Hold. Every failure an agent can fix, bad arguments
// included, is a result with isError and a typed error.kind, never a
// protocol error. The package knows nothing of Docker or Kubernetes: it
// runs calls through a sandbox.Runner, and treats the manifest as
// read-only.
package tools
