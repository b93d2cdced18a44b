// Package egress is the host's side of a box's network: the policy over
// the manifest's declared endpoints, the resolver and dialer that connect
// only to the addresses it resolved and checked, and the HTTP proxy
// (CONNECT and absolute-URI plain HTTP) that serves each connection a
// box's program opens, carried to the host as a stream of the box's
// channel. Every connection, allowed or not, becomes a
// contract.Connection.
//
// For an entry that declares a credential, the proxy adds it on the way
// out (credential.go, ca.go, intercept.go): it ends the box's TLS with a
// certificate of runbox's own CA, makes its own verified TLS connection
// to the server and sets the declared header on each request. The secret
// is read once at start and lives here only: never in a box, a record, a
// log or an error.
//
// A box never has a network interface: runbox-init only forwards the
// bytes of each connection accepted on the box's loopback, so everything
// that decides (parsing the request, the policy, DNS, the caps) happens
// here, outside the box. egress knows nothing of engines, MCP or the
// channel's framing.
package egress
