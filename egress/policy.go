package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/runbox-mcp/runbox/manifest"
)

// Policy decides which host names, ports and addresses a box may reach.
type Policy struct {
	allow []rule
}

type rule struct {
	index int
	ep    manifest.Endpoint
	// ip is set when the entry names an address rather than a name.
	ip     netip.Addr
	ranges []netip.Prefix
}

// NewPolicy compiles the manifest's network section (already validated).
func NewPolicy(n manifest.Network) *Policy {
	p := &Policy{}
	for i, e := range n.Allow {
		r := rule{index: i, ep: e}
		if a, err := netip.ParseAddr(e.Host); err == nil {
			r.ip = a.Unmap()
		}
		for _, s := range e.Addresses {
			if pr, err := manifest.ParseAddrRange(s); err == nil {
				r.ranges = append(r.ranges, pr)
			}
		}
		p.allow = append(p.allow, r)
	}
	return p
}

// Match is the entry a host and port fall under.
type Match struct {
	Index    int
	Endpoint manifest.Endpoint
	r        *rule
}

// Rule names the entry as the records and messages say it.
func (m Match) Rule() string {
	return fmt.Sprintf("network.allow[%d] (%s)", m.Index, m.Endpoint)
}

// Match finds the first entry that allows host:port. host is compared
// lower-cased and without a trailing dot; an IP address in brackets or
// not is compared as an address.
func (p *Policy) Match(host string, port int) (Match, bool) {
	host = NormalizeHost(host)
	addr, isIP := parseIP(host)
	for i := range p.allow {
		r := &p.allow[i]
		if !slices.Contains(r.ep.PortList(), port) {
			continue
		}
		var ok bool
		switch {
		case r.ip.IsValid():
			ok = isIP && addr == r.ip
		case isIP:
			ok = false
		case strings.HasPrefix(r.ep.Host, "*."):
			ok = strings.HasSuffix(host, r.ep.Host[1:])
		default:
			ok = host == r.ep.Host
		}
		if ok {
			return Match{Index: r.index, Endpoint: r.ep, r: r}, true
		}
	}
	return Match{}, false
}

// NormalizeHost lower-cases a host, drops a trailing dot and IPv6
// brackets.
func NormalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return h
}

func parseIP(h string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(h)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Permits says whether the matched entry lets the box reach addr, and if
// not, why. A special address (private, loopback, link-local, cloud
// metadata, ...) needs the entry to name it: as its host, or among its
// addresses. An entry with addresses allows only those.
func (m Match) Permits(addr netip.Addr) (bool, string) {
	addr = addr.Unmap()
	r := m.r
	if r.ip.IsValid() {
		if addr == r.ip {
			return true, ""
		}
		return false, fmt.Sprintf("%s is not the address the entry names", addr)
	}
	for _, pr := range r.ranges {
		if pr.Contains(addr) {
			return true, ""
		}
	}
	if what := Special(addr); what != "" {
		return false, fmt.Sprintf("it resolves to %s, a %s address, which no entry names (add addresses: [%s] to %s if that is intended)", addr, what, addr, m.Rule())
	}
	if len(r.ranges) > 0 {
		return false, fmt.Sprintf("it resolves to %s, outside the entry's addresses", addr)
	}
	return true, ""
}

var specials = []struct {
	what string
	p    netip.Prefix
}{
	{"cloud-metadata", netip.MustParsePrefix("169.254.169.254/32")},
	{"cloud-metadata", netip.MustParsePrefix("fd00:ec2::254/128")},
	{"unspecified", netip.MustParsePrefix("0.0.0.0/8")},
	{"shared (carrier-grade NAT)", netip.MustParsePrefix("100.64.0.0/10")},
	{"IETF protocol", netip.MustParsePrefix("192.0.0.0/24")},
	{"documentation", netip.MustParsePrefix("192.0.2.0/24")},
	{"benchmarking", netip.MustParsePrefix("198.18.0.0/15")},
	{"documentation", netip.MustParsePrefix("198.51.100.0/24")},
	{"documentation", netip.MustParsePrefix("203.0.113.0/24")},
	{"reserved", netip.MustParsePrefix("240.0.0.0/4")},
	{"NAT64", netip.MustParsePrefix("64:ff9b::/96")},
	{"NAT64", netip.MustParsePrefix("64:ff9b:1::/48")},
	{"6to4", netip.MustParsePrefix("2002::/16")},
	{"Teredo", netip.MustParsePrefix("2001::/32")},
	{"documentation", netip.MustParsePrefix("2001:db8::/32")},
}

// Special names the class of an address a box may not reach unless an
// entry names it, or "" for an ordinary public unicast address.
func Special(a netip.Addr) string {
	a = a.Unmap()
	for _, s := range specials {
		if s.p.Contains(a) {
			return s.what
		}
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsUnspecified():
		return "unspecified"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	return ""
}

// Suggest is the manifest entry that would allow host:port, for a
// refusal's message.
func Suggest(host string, port int) string {
	return fmt.Sprintf("network.allow: [{host: %s, ports: [%d]}]", NormalizeHost(host), port)
}
