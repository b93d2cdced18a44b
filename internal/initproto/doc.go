// Package initproto is the wire protocol between the runbox server and
// runbox-init, the PID 1 of every box.
//
// The box's attached stdin and stdout carry one stream multiplexer session
// (hashicorp/yamux, [MuxConfig]): the server is its client, runbox-init its
// server. Every stream starts with a message whose [Header] names its kind.
// A message is one JSON line (its body and the sizes of its blobs) followed
// by the blobs as raw bytes ([Send], [Receive]).
//
// A run: the server opens a [StreamJob] stream and sends the [Job] (code,
// stdin and input files as blobs); runbox-init answers on that stream with
// the [Report] (stdout and stderr as blobs), then opens one
// [StreamArtifact] stream per sent artifact with its content as one blob,
// and waits for the server to end the channel ([ResetWriter.End]). Each side
// bounds what it reads. While the job runs, the server may open
// [StreamPeek] streams (peek.go): each is answered with the output
// captured so far, bounded, without disturbing the run.
//
// The server-to-box direction is framed and each channel starts with a
// reset (reset.go), so a box outlives its server: a restarted server
// attaches again, and a [StreamCollect] stream naming the run gets the
// report and artifacts its job's stream would have had.
//
// Streams the box opens during its run (the code's tool calls, proxied
// connections) are served on the server by the run's [StreamHandler]s,
// by kind, under the bounds of its [Streams] (streams.go): the types
// live here, with the channel, so that the handlers' packages (upstream,
// egress's wiring) need not import the run algorithm.
//
// The package owns only the format and these types; it knows nothing of
// Docker, Kubernetes or MCP.
package initproto
