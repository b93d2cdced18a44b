package mcpserver

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// loopbackHosts are the names a browser may use for a loopback listener.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// originPolicy says which browser origins may use the MCP paths: the
// listener's own and the declared ones. The MCP transport rules ask for
// this check against DNS rebinding: a page of another origin, whose name
// now resolves to this machine, or that posts straight to localhost, must
// not reach the tools through the user's browser.
type originPolicy struct {
	own     string          // the listener's origin, named in refusals
	allowed map[string]bool // canonical origins
	logger  *slog.Logger
}

// newOriginPolicy returns the policy of a listener known by addrs (each
// host:port: as configured, and as bound) with the declared origins. A
// declared origin that does not parse allows nothing (CheckOrigins reports
// it before serving).
func newOriginPolicy(addrs []string, declared []string, logger *slog.Logger) *originPolicy {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &originPolicy{allowed: map[string]bool{}, logger: logger}
	for _, addr := range addrs {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		var hosts []string
		ip, ipErr := netip.ParseAddr(host)
		switch {
		case host == "" || (ipErr == nil && ip.IsUnspecified()):
			// Every interface, loopback included: only the loopback names
			// are known to be this server; others must be declared.
			hosts = loopbackHosts
		case strings.EqualFold(host, "localhost") || (ipErr == nil && ip.IsLoopback()):
			hosts = append([]string{host}, loopbackHosts...)
		default:
			hosts = []string{host}
		}
		for _, h := range hosts {
			// Port 0 (any) is no origin's: the bound address says which.
			if o, ok := canonicalOrigin("http://" + net.JoinHostPort(h, port)); ok {
				if p.own == "" {
					p.own = o
				}
				p.allowed[o] = true
			}
		}
	}
	for _, d := range declared {
		if o, ok := canonicalOrigin(d); ok {
			p.allowed[o] = true
		}
	}
	return p
}

// guard answers 403 to a request whose Origin is not allowed, before next
// (the bearer check) sees it. A request without Origin is not from a
// browser page and passes.
func (p *originPolicy) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, origin := range r.Header.Values("Origin") {
			o, ok := canonicalOrigin(origin)
			if ok && p.allowed[o] {
				continue
			}
			p.logger.Warn("refused a request from a foreign browser origin", "origin", origin, "path", r.URL.Path, "remote", r.RemoteAddr)
			msg := fmt.Sprintf("runbox: Origin %q may not use this server: browsers may reach it only from its own origin (%s) "+
				"and the origins declared in the manifest's http.allowed_origins.", origin, p.own)
			if ok {
				msg += fmt.Sprintf(" To let a web page at this origin use it, declare it: http: {allowed_origins: [%q]}", origin)
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalOrigin returns an origin as scheme://host:port with the scheme
// and host in lower case, IP addresses in their canonical form and the
// default port spelled out, so that equal origins compare equal. Only http
// and https origins with nothing after the port are origins.
func canonicalOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Hostname() == "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return "", false
		}
	}
	return u.Scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)), true
}

// CheckOrigins refuses a declared origin that is not scheme://host[:port].
func CheckOrigins(declared []string) error {
	for _, d := range declared {
		if _, ok := canonicalOrigin(d); !ok {
			return fmt.Errorf("allowed origin %q: want http:// or https://, a host and an optional port, nothing after it (e.g. https://runbox.example.com)", d)
		}
	}
	return nil
}
