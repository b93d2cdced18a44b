// Package audit keeps runbox's audit log: one JSON line per run, with
// secret-looking values redacted, rotated by size. `runbox runs` lists it
// and `runbox replay` re-runs a logged job.
//
// It must not know the engine, the drivers or MCP: it takes the entries the
// tools package builds.
package audit
