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
