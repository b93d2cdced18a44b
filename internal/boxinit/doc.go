// Package boxinit is runbox-init: the PID 1 of every box.
//
// It serves the box's side of the channel (package initproto: a stream
// multiplexer over its stdin and stdout): it accepts the job stream,
// unpacks the input files into the workspace,
// runs the interpreter through a self-exec trampoline that applies rlimits,
// captures the head and tail of stdout and stderr, enforces the wall-clock
// deadline by killing every process in the box, reaps orphans, collects the
// artifacts without following symlinks, answers with the report on the job
// stream and sends each artifact on a stream of its own. While the job
// runs it answers the server's peeks with the output captured so far
// (peek.go), never draining the capture.
//
// A session box keeps one interpreter alive (session.go, with a driver
// per language in drivers/) and runs each job as a cell of it. A one-off
// job and a session's cell go through one call algorithm (call.go): they
// differ only in how the code runs (a process of its own, or a cell sent
// to the interpreter), and in what is a session's own (the state kept,
// the last expression shown).
//
// It must stay small, static and independent of the image: it relies on
// nothing in the box but the interpreter named in the job. It knows nothing
// of Docker or MCP.
package boxinit
