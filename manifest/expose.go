package manifest

import (
	"fmt"
	"net"
	"slices"
)

// Expose lets a session's web server be opened by the person: runbox
// listens on the host and carries each connection over the box's channel
// to a port on the box's loopback (session_expose). Off unless enabled.
type Expose struct {
	Enabled bool `json:"enabled" jsonschema_description:"Offers session_expose, session_exposures and session_unexpose: a URL on the host that reaches a port of a session box's loopback over its channel (the box keeps no network interface)."`
	// MaxPerSession and MaxConnections are the caps.
	MaxPerSession  int `json:"max_per_session" jsonschema_description:"Most exposures open at once in one session."`
	MaxConnections int `json:"max_connections" jsonschema_description:"Most connections open at once to one exposure; one more is answered 503."`
	// AnswerWithinSeconds bounds the wait for the box's answer to a
	// request, and its silences once the person has closed their side,
	// so a box server that never answers holds no slot forever.
	AnswerWithinSeconds int `json:"answer_within_seconds" jsonschema_description:"Seconds the app in the box has to send the first byte of its answer to a request; past it the person gets 504 and the connection ends. Once an answer has begun it may stream for as long as the app sends it; after the person has closed their side, each silence of the app is bounded by it too, so an answer held quiet for someone who left frees its connection."`
	// Listen is the address the listeners bind; loopback unless the
	// operator says otherwise.
	Listen string `json:"listen" jsonschema_description:"The IP address the exposures' listeners bind: 127.0.0.1 (the default) or ::1 keep them on this machine; any other address puts them on the network, with the token as the only gate."`
	// Host is the name the URLs carry, the only Host a request may name.
	Host string `json:"host,omitempty" jsonschema_description:"The host name the URLs carry and the only one a request's Host header may name (with the port); empty: the listen address. Set it when listening beyond loopback, e.g. to the team server's name."`
	// Ports, when set, are the only ports the listeners may take;
	// empty: a free port the system picks.
	Ports []int `json:"ports,omitempty" jsonschema_description:"The host ports exposures may listen on, the first free one taken; empty: a free port the system picks."`
}

// DefaultExpose is off, loopback only, 4 exposures per session, 32
// connections each, 60 s to begin an answer (a reverse proxy's usual
// read timeout).
func DefaultExpose() Expose {
	return Expose{MaxPerSession: 4, MaxConnections: 32, AnswerWithinSeconds: 60, Listen: "127.0.0.1"}
}

// URLHost is the name an exposure's URL carries.
func (e Expose) URLHost() string {
	if e.Host != "" {
		return e.Host
	}
	return e.Listen
}

func (e Expose) validate(bad func(string, any, string), rangeI func(string, int64, int64, int64)) {
	rangeI("sessions.expose.max_per_session", int64(e.MaxPerSession), 1, 64)
	rangeI("sessions.expose.max_connections", int64(e.MaxConnections), 1, 4096)
	rangeI("sessions.expose.answer_within_seconds", int64(e.AnswerWithinSeconds), 1, 3600)
	if net.ParseIP(e.Listen) == nil {
		bad("sessions.expose.listen", e.Listen, "an IP address, e.g. 127.0.0.1")
	}
	if e.Host != "" && (len(e.Host) > 253 || slices.ContainsFunc([]byte(e.Host), func(c byte) bool {
		return !(c == '.' || c == '-' || c == ':' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	})) {
		bad("sessions.expose.host", e.Host, "a host name or an IP address")
	}
	for i, p := range e.Ports {
		rangeI(fmt.Sprintf("sessions.expose.ports[%d]", i), int64(p), 1, 65535)
	}
}
