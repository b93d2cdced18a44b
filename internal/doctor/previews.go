package doctor

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// previewCheck checks that runbox can open the manifest's previews: a
// listener on sessions.expose.listen that a connection reaches, and
// whether that address keeps them on this machine; false when the
// manifest offers none.
func previewCheck(m *manifest.Manifest) (Check, bool) {
	e := m.Sessions.Expose
	if !e.Enabled {
		return Check{}, false
	}
	c := Check{Name: "previews"}
	if !m.Sessions.Enabled {
		c.Status, c.Detail = Warn, "sessions.expose is enabled but sessions are off, so there is no session to expose"
		c.Fix = "Set sessions.enabled: true, or sessions.expose.enabled: false."
		return c, true
	}
	addr, err := reachable(e)
	if err != nil {
		c.Status, c.Detail = Fail, err.Error()
		c.Fix = "Set sessions.expose.listen to an address of this machine (127.0.0.1 keeps previews on it), or free or change sessions.expose.ports."
		return c, true
	}
	// The listener is runbox's own and reaches the box over its channel,
	// never over the engine's network: Docker Desktop, Podman machines
	// and remote engines change nothing.
	how := fmt.Sprintf("URLs http://%s/?runbox_token=…, each connection carried into the session's box over its channel (works the same with Docker Desktop, Podman machines and remote engines)",
		net.JoinHostPort(e.URLHost(), "<port>"))
	if ip := net.ParseIP(e.Listen); ip != nil && ip.IsLoopback() {
		c.Status, c.Detail = OK, fmt.Sprintf("listeners on %s, loopback only: only this machine's browsers reach them (a test listener answered at %s); %s", e.Listen, addr, how)
		return c, true
	}
	c.Status = Warn
	c.Detail = fmt.Sprintf("listeners on %s are reachable from the network, with the URL's token the only gate and plain HTTP on the wire (a test listener answered at %s); %s", e.Listen, addr, how)
	c.Fix = "Set sessions.expose.listen: 127.0.0.1 unless people on other machines must open previews; then set sessions.expose.host to the name they reach this machine by."
	if e.Host == "" && net.ParseIP(e.Listen).IsUnspecified() {
		c.Detail += "; the URLs name " + e.Listen + ", which no other machine can open"
		c.Fix = "Set sessions.expose.host to the name other machines reach this one by (its URLs carry it), or sessions.expose.listen: 127.0.0.1."
	}
	return c, true
}

// reachable listens as an exposure would (on a port of the manifest's
// list, or a free one) and connects to that listener: the address it
// answered at, or why not.
func reachable(e manifest.Expose) (string, error) {
	ports := e.Ports
	if len(ports) == 0 {
		ports = []int{0}
	}
	var ln net.Listener
	var err error
	for _, p := range ports {
		if ln, err = net.Listen("tcp", net.JoinHostPort(e.Listen, strconv.Itoa(p))); err == nil {
			break
		}
	}
	if err != nil {
		if len(e.Ports) > 0 {
			return "", fmt.Errorf("none of sessions.expose.ports %v is free on %s: %v", e.Ports, e.Listen, err)
		}
		return "", fmt.Errorf("cannot listen on %s: %v", e.Listen, err)
	}
	defer ln.Close()
	accepted := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close()
		}
		close(accepted)
	}()
	// An unspecified address is reached through loopback, as a browser on
	// this machine would.
	to := ln.Addr().(*net.TCPAddr)
	if to.IP.IsUnspecified() {
		lo := net.IPv4(127, 0, 0, 1)
		if net.ParseIP(e.Listen).To4() == nil {
			lo = net.IPv6loopback
		}
		to = &net.TCPAddr{IP: lo, Port: to.Port}
	}
	conn, err := net.DialTimeout("tcp", to.String(), 5*time.Second)
	if err != nil {
		_ = ln.Close()
		<-accepted
		return "", fmt.Errorf("listening on %s works, but a connection to %s fails: %v", ln.Addr(), to, err)
	}
	_ = conn.Close()
	<-accepted
	return ln.Addr().String(), nil
}
