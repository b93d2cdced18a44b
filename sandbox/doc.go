// Package sandbox is the execution engine: the [Runner] interface, the
// Docker backend with its hardening profile, the reaper of leftover boxes,
// and the classification of what happened into the error kinds of the
// run_code contract.
//
// It must not know about MCP: it takes a [contract.Job] and returns a [contract.Result].
package sandbox
