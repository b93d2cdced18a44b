package initproto

// The relay reaches a box whose stdin has ended: on Podman the box's stdin
// closes with its server's attach (Podman has no StdinOnce), so a server
// restarted after a crash cannot open the channel again through a new
// attach. A box started with RelayFlag listens, from its start, on
// RelaySocket, an abstract unix socket of the box's own network namespace
// (a box has one, with no interface). The restarted server execs
// `runbox-init relay` (RelayArg) in the box as uid 0, which joins its
// exec's stdin and stdout to that socket. runbox-init accepts a relay only
// from uid 0 (the program runs under the manifest's non-root uid) and
// answers it one byte: RelayReady, then the relay is the box's channel as
// a new attach would have been (a reset opens each channel on it, the
// newest connection replacing the one before), or RelayBusy and the end of
// the connection when stdin is still open (a server holds the box's
// attach: a new attach reaches it).
const (
	RelayFlag   = "--relay"
	RelayArg    = "relay"
	RelaySocket = "@runbox-init/channel"

	RelayReady byte = 'R'
	RelayBusy  byte = 'B'
)

// DirectSocket is where a session box started with [Session.Direct]
// listens, from its start, for its channels from the server on its own
// host: an abstract unix socket of the box's network namespace (a box has
// one, with no interface), which the server, root on that host, dials
// from inside that namespace. The engine's attach carries a channel
// through two more processes each way (the engine and its shim, copying
// between pipes); this socket joins the server and runbox-init alone.
// runbox-init accepts a connection only from uid 0 (the program runs under
// the manifest's non-root uid) and serves each as it serves stdin: a reset
// opens each channel on it. Stdin's channels are served beside it, and a
// newer connection replaces the one before.
const DirectSocket = "@runbox-init/direct"
