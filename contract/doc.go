// Package contract is the run_code contract in Go: the [Job] a validated call
// becomes, the [Result] every run answers with, its typed [ErrorInfo] with
// the error kinds and limits as constants, the artifact URI format, the
// system calls the sandbox forbids, and every sentence an agent reads about a
// run (hints, messages, the text summary), so they can be reviewed together.
//
// It is pure data. It must not know how a run happens (that is sandbox), how
// a box is started (the drivers: sandbox/docker, sandbox/kube, sandbox/oci)
// or how MCP carries a result (tools).
package contract
