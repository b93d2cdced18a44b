// Package runs is the run service below the MCP layer: the run_code
// pipeline (Service.Run over a typed Call: the client's budget, validation
// against the manifest, the run in a fresh box or its session, metrics,
// the audit line), the arguments and their validation, budgets, run ids,
// input files read from declared folders and artifacts saved to the
// outputs folder, the artifact store that keeps recent runs' files, the
// format of a long run's record in the run store (Record, its result kept
// as a KeptResult rather than a rendered answer) and which boxes those
// records hold (KeepsBox). Its subpackage inflight is the registry of runs
// in flight (long runs, MCP tasks' runs) that keeps those records.
//
// A call names its run id and its entry in that registry itself
// (Call.RunID, Call.Hold): nothing travels in context values. The MCP
// layer (tools) decodes and renders; `runbox run`, `runbox replay` and
// doctor call Service.Run directly. The package (and inflight) imports no
// MCP server code (tools,
// internal/mcpserver, prompts, mcp-go's server), which imports_test.go
// checks for it and for every caller outside the MCP layer; it knows no
// engine (it runs calls through a sandbox.Runner) and treats the manifest
// as read-only.
package runs
