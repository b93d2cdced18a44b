package mcpserver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// streamable serves the streamable HTTP transport with mcp-go: a POST
// whose body the listener holds (bodyLimit) through Handle, which takes
// the body as it is, rather than ServeHTTP, which reads it again into a
// copy of its own; every other request through ServeHTTP.
type streamable struct{ h *server.StreamableHTTPServer }

func (s streamable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := heldBytes(r)
	if r.Method != http.MethodPost || !ok {
		s.h.ServeHTTP(w, r)
		return
	}
	// ServeHTTP's guard against DNS rebinding, which Handle leaves to
	// its caller: on a loopback listener the Host must be loopback too.
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopbackHost(local.String()) && !loopbackHost(r.Host) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return
	}
	s.h.Handle(responseOf{w}, &server.HTTPRequest{Method: r.Method, URL: r.URL, Header: r.Header, Body: body, Context: r.Context()})
}

// loopbackHost reports whether addr (a host, or host:port) is a loopback
// name or address.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	ip, err := netip.ParseAddr(host)
	return strings.EqualFold(host, "localhost") || (err == nil && ip.IsLoopback())
}

// responseOf is an http.ResponseWriter as mcp-go's Handle writes to it.
type responseOf struct{ http.ResponseWriter }

func (r responseOf) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

func (r responseOf) CanStream() bool {
	_, ok := r.ResponseWriter.(http.Flusher)
	return ok
}

func (r responseOf) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(r.ResponseWriter).SetWriteDeadline(t)
}
