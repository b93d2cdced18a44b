// Package boxinit is runbox-init: the PID 1 of every box.
//
// It serves the box's side of the channel (package initproto: a stream
// multiplexer over its stdin and stdout): it accepts the job stream,
// unpacks the input files into the workspace,
// runs the interpreter through a self-exec trampoline that applies rlimits,
// captures the head and tail of stdout and stderr, enforces the wall-clock
// deadline by killing every process in the box, reaps orphans, collects the
// artifacts without following symlinks, answers with the report on the job
// stream and sends each artifact on a stream of its own.
//
// It must stay small, static and independent of the image: it relies on
// nothing in the box but the interpreter named in the job. It knows nothing
// of Docker or MCP.
package boxinit
