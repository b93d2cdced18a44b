// Package sandbox is the run algorithm, once for every platform: the
// [Runner] interface and its [BoxRunner] (admission with slots and a
// bounded queue, the warm pool, deadlines and the backstop, cancellation,
// sessions, the exchange with runbox-init over the box's two-way channel
// (one call, call.go, for a one-off run and a session's cell),
// classification into the contract's error kinds, and the result), the
// result [Cache], image [Probe]s, and the labels and [Owner] that let a
// restarted server reap what a crashed one left. Streams a box opens
// during its run (the code's tool calls, proxied connections) are served
// by the run's own initproto.StreamHandlers ([RunRequest].Streams) and its
// [Network] ([Options].Network, egress's proxy), which callers supply
// and this package only bounds and dispatches by kind. A run in progress
// shows its output so far on request ([Runner].Peek, peek.go), over the
// same channel.
//
// Boxes come from a [Driver]: sandbox/docker (Docker and Podman),
// sandbox/kube (Kubernetes) and sandbox/oci (runc, with no engine)
// implement it, and import this package, never the reverse, nor one
// another (what two share is sandbox/linuxbox's); sandbox/backend maps a
// manifest's backend to its driver. This package must not know an engine's client (no moby, no
// client-go), MCP, the upstream servers nor egress: it takes a
// [RunRequest] (a contract.Job and what the call brings besides: a
// client's folders, stream handlers, an approver), never a value hidden
// in the context, and returns a contract.Result.
package sandbox
