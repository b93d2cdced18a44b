package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to an address; (*net.Dialer).DialContext is one.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// dialTimeout bounds the lookup and the connection to one destination.
const dialTimeout = 10 * time.Second

// errRefused marks a destination the policy refused after resolving it.
var errRefused = errors.New("refused")

// dial resolves host (the manifest's hosts first, then DNS, by the
// server, never the box), keeps the addresses the entry permits and
// connects to the first that answers. It only ever connects to an address
// it resolved and checked itself, so a name cannot be re-pointed between
// the check and the connection (DNS rebinding).
func (p *Proxy) dial(ctx context.Context, m Match, host string, port int) (net.Conn, netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	host = NormalizeHost(host)
	var addrs []netip.Addr
	if a, ok := parseIP(host); ok {
		addrs = []netip.Addr{a}
	} else if s, ok := p.net.Hosts[host]; ok {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, netip.Addr{}, err
		}
		addrs = []netip.Addr{a}
	} else {
		var err error
		addrs, err = p.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, netip.Addr{}, fmt.Errorf("cannot resolve %s: %w", host, err)
		}
	}
	var permitted []netip.Addr
	var why string
	for _, a := range addrs {
		ok, reason := m.Permits(a)
		if ok {
			permitted = append(permitted, a.Unmap())
		} else if why == "" {
			why = reason
		}
	}
	if len(permitted) == 0 {
		if why == "" {
			why = "it resolves to no address"
		}
		return nil, netip.Addr{}, fmt.Errorf("%w: %s", errRefused, why)
	}
	var last error
	for _, a := range permitted {
		c, err := p.dialer(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, a, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.Addr{}, fmt.Errorf("cannot connect: %w", last)
}
