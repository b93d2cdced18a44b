package contract

import "fmt"

// Connection is one connection a run's program made, or tried to make,
// through runbox's proxy: the run's `network` list, the audit log and the
// metrics all read it.
type Connection struct {
	Host string `json:"host" jsonschema_description:"The host name (or address) the program asked for."`
	Port int    `json:"port"`
	// Method is CONNECT for a tunnel (HTTPS), else the HTTP method of a
	// plain request.
	Method string `json:"method" jsonschema_description:"CONNECT for a tunnel (HTTPS), else the plain HTTP request's method."`
	// Address is the resolved address connected to.
	Address string `json:"address,omitempty" jsonschema_description:"The address the server resolved and connected to."`
	Allowed bool   `json:"allowed"`
	// Rule is the manifest entry that allowed it, or that it fell under
	// when an address check refused it.
	Rule string `json:"rule,omitempty" jsonschema_description:"The manifest entry that allowed the connection, e.g. network.allow[0] (api.example.com:443)."`
	// Reason says why a connection was refused or cut.
	Reason   string `json:"reason,omitempty" jsonschema_description:"Why the connection was refused, failed or was cut (a cap)."`
	BytesOut int64  `json:"bytes_out" jsonschema_description:"Bytes the program sent."`
	BytesIn  int64  `json:"bytes_in" jsonschema_description:"Bytes the program received."`
	// DurationMs is from the request to the connection's end.
	DurationMs int64 `json:"duration_ms"`
	// Cut names the cap that ended the connection: bytes or time.
	Cut string `json:"cut,omitempty" jsonschema:"enum=,enum=bytes,enum=time" jsonschema_description:"The cap that ended the connection: bytes (network.max_bytes) or time (network.connection_seconds or the run's deadline)."`
	// Requests are the HTTP requests of a connection runbox read itself:
	// one to an entry with a credential, whose TLS the proxy ends.
	Requests []HTTPRequest `json:"requests,omitempty" jsonschema_description:"For an entry with a credential (runbox ends its TLS and adds the header): each request on the connection, at most 100: method, path without its query, the server's status."`
}

// HTTPRequest is one request the proxy carried inside a connection it
// read: never a header, a body or the query (they may hold secrets).
type HTTPRequest struct {
	Method string `json:"method"`
	Path   string `json:"path" jsonschema_description:"The request's path; a query is replaced by ?[redacted]."`
	Status int    `json:"status,omitempty" jsonschema_description:"The server's status code; absent when it did not answer."`
}

// Caps that cut a connection.
const (
	CutBytes = "bytes"
	CutTime  = "time"
)

// ForbiddenNetwork is the error of a run that failed after the proxy
// refused c: the host in the message, what to do in the hint.
func ForbiddenNetwork(c Connection, refused int) ErrorInfo {
	msg := fmt.Sprintf("the sandbox refused a connection to %s:%d: %s", c.Host, c.Port, c.Reason)
	if refused > 1 {
		msg += fmt.Sprintf(" (%d connections were refused)", refused)
	}
	return ErrorInfo{Kind: KindForbiddenNetwork, Message: msg,
		Hint: "Only the endpoints the manifest declares can be reached (see the tool description); use one of those, or work without this request. Adding an endpoint is for the server's operator (network.allow)."}
}
