// Package inflight is the registry of runs in flight, below the MCP
// layer: one Registry for the runs that outlast
// limits.answer_within_seconds (answered running, then collected by
// run_wait, stopped by run_cancel, or abandoned) and for the runs of MCP
// tasks' calls, kept by task id. It counts long runs against the
// manifest's caps, holds each run's audit line until its client collects
// it or gives it up, keeps every result once, as a contract.Result (its
// answer is the caller's to render when it is collected), and sweeps
// results past their keeping time.
//
// With a run store (Durable: internal/runstore, in the state directory)
// the long runs and tasks' runs outlive the process: a run's record
// (runs.Record) is written when it goes to the background or when a task's
// call starts, and again at its end with its result (runs.KeptResult); a
// restarted server reads a finished record's result back, adopts a running
// one through an Adopter (the runner finds its box again), and follows a
// run another live server holds through its record.
//
// A run follows its call through the pipeline as the call's runs.Hold
// (Call.RunID, Call.Hold). The package imports no MCP code (the run
// service's imports_test.go checks it): the MCP layer (tools) reads a
// call's bound and task from the request, and renders the answers.
package inflight
