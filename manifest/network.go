package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Network is what a box may reach. A box never has a network interface:
// with endpoints declared, runbox-init serves an HTTP proxy on the box's
// loopback and the server checks, resolves, connects and records each
// connection (package egress). Without any, a box reaches nothing.
//
// The legacy form `network: none` still reads as "no endpoints".
type Network struct {
	// Allow lists the endpoints a box may connect to.
	Allow []Endpoint `json:"allow" jsonschema_description:"Endpoints a box may reach through runbox's proxy (HTTP and HTTPS clients that honour HTTP_PROXY/HTTPS_PROXY, and Node's fetch); empty: no network at all. The legacy value network: none means the same as an empty list."`
	// Hosts resolves names without DNS, like /etc/hosts, for private
	// services; an address it gives is still checked like one DNS gave.
	Hosts map[string]string `json:"hosts,omitempty" jsonschema_description:"Names resolved by the server without DNS (name: IP address), like /etc/hosts; a private or loopback address found this way is still refused unless an allow entry names it."`
	// MaxBytes caps the bytes of one run's connections, both ways together.
	MaxBytes ByteSize `json:"max_bytes" jsonschema_description:"Bytes one run may move through the proxy, both directions of all its connections together; a connection that passes it is cut and the run's network record says so."`
	// ConnectionSeconds caps one connection's lifetime.
	ConnectionSeconds float64 `json:"connection_seconds" jsonschema_description:"Longest life of one proxied connection (a slow client or server is cut there); never past the run's own deadline."`
	// MaxConnections caps the connections one run may open.
	MaxConnections int `json:"max_connections" jsonschema_description:"Connections one run may open through the proxy; further ones are refused."`
	// Index names the package indexes pip and npm use (index.go).
	Index Index `json:"index" jsonschema_description:"The package indexes pip and npm in a box use without being told (pip install x, npm install x), each reachable through network.allow."`
}

// Endpoint is one declared destination.
type Endpoint struct {
	Host string `json:"host" jsonschema_description:"An exact host name (api.example.com), a wildcard for its subdomains (*.example.com, not example.com itself), or an IP address."`
	// Ports default to 80 and 443.
	Ports []int `json:"ports,omitempty" jsonschema_description:"Allowed ports; empty: 80 and 443."`
	// Addresses are private, loopback or link-local addresses (or
	// ranges) that this entry's names may resolve to; without them such
	// an address is refused (DNS rebinding, cloud metadata).
	Addresses []string `json:"addresses,omitempty" jsonschema_description:"Private, loopback or link-local addresses or CIDR ranges this entry's names may resolve to (e.g. 10.0.0.0/8 for an internal service). Without them such an address is refused, so a public name that resolves to 127.0.0.1 or 169.254.169.254 reaches nothing."`
	// Approve "ask" makes a run_code call ask the client's user first.
	Approve string `json:"approve,omitempty" jsonschema:"enum=,enum=ask" jsonschema_description:"ask: before a run, runbox asks the client's user through MCP elicitation whether the run may use this endpoint (one question per call naming every such endpoint); a declined question, or a client that cannot elicit, gets the endpoint's connections refused with that reason."`
	// Credential, when set, is added by the proxy to this entry's
	// requests (credential.go); such an entry is reached over HTTPS only.
	Credential *Credential `json:"credential,omitempty" jsonschema_description:"A secret runbox's proxy adds to this entry's requests as a header, read from the server's environment or a file, never present in the box: the proxy ends the box's TLS with a certificate of runbox's own CA (which boxes then trust) and makes its own verified TLS connection on. Such an entry takes HTTPS only."`
}

// Approval modes of an endpoint.
const ApproveAsk = "ask"

// DefaultPorts are an endpoint's ports when it names none.
var DefaultPorts = []int{80, 443}

// PortList returns the endpoint's ports, the defaults when it names none.
func (e Endpoint) PortList() []int {
	if len(e.Ports) == 0 {
		return DefaultPorts
	}
	return e.Ports
}

// String is the endpoint as the agent and the logs read it.
func (e Endpoint) String() string {
	ps := make([]string, len(e.PortList()))
	for i, p := range e.PortList() {
		ps[i] = fmt.Sprint(p)
	}
	s := e.Host + ":" + strings.Join(ps, ",")
	if e.Approve == ApproveAsk {
		s += " (asks the user first)"
	}
	if e.Credential != nil {
		s += " (runbox adds its " + e.Credential.HeaderName() + " header)"
	}
	return s
}

// Enabled says whether any endpoint is declared.
func (n Network) Enabled() bool { return len(n.Allow) > 0 }

// UnmarshalJSON reads the object form, strictly (an unknown field is an
// error, as everywhere in the manifest), or the legacy string "none".
func (n *Network) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s != "none" {
			return fmt.Errorf("network: %q: none, or an object with allow: [...]", s)
		}
		n.Allow = nil
		return nil
	}
	type plain Network
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(n))
}

var hostNameRe = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidHostPattern says whether h is an endpoint host: a lower-case name,
// *.domain (the domain at least two labels, so never *.com), or an IP
// address.
func ValidHostPattern(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if d, ok := strings.CutPrefix(h, "*."); ok {
		return len(d) <= 253 && hostNameRe.MatchString(d) && strings.Contains(d, ".")
	}
	return len(h) <= 253 && hostNameRe.MatchString(h)
}

func (n Network) validate(bad func(field string, value any, allowed string)) {
	for i, e := range n.Allow {
		f := fmt.Sprintf("network.allow[%d]", i)
		if !ValidHostPattern(e.Host) || e.Host == "*" {
			bad(f+".host", e.Host, "a lower-case host name, *.domain or an IP address")
		}
		for _, p := range e.Ports {
			if p < 1 || p > 65535 {
				bad(f+".ports", p, "from 1 to 65535")
			}
		}
		for _, a := range e.Addresses {
			if _, err := ParseAddrRange(a); err != nil {
				bad(f+".addresses", a, "an IP address or a CIDR range")
			}
		}
		if e.Approve != "" && e.Approve != ApproveAsk {
			bad(f+".approve", e.Approve, "empty or ask")
		}
	}
	for name, a := range n.Hosts {
		if !hostNameRe.MatchString(name) {
			bad("network.hosts", name, "lower-case host names")
		}
		if _, err := netip.ParseAddr(a); err != nil {
			bad("network.hosts."+name, a, "an IP address")
		}
	}
	if n.MaxBytes < 1*KiB || n.MaxBytes > 64*GiB {
		bad("network.max_bytes", n.MaxBytes, fmt.Sprintf("from %s to %s", 1*KiB, 64*GiB))
	}
	if !(n.ConnectionSeconds >= 1 && n.ConnectionSeconds <= 3600) {
		bad("network.connection_seconds", n.ConnectionSeconds, "from 1 to 3600")
	}
	if n.MaxConnections < 1 || n.MaxConnections > 100000 {
		bad("network.max_connections", n.MaxConnections, "from 1 to 100000")
	}
	n.validateCredentials(bad)
	n.validateIndex(bad)
}

// ParseAddrRange reads an IP address (a range of one) or a CIDR range.
func ParseAddrRange(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// describe is the network rule of the tool description: none at all, or
// the declared endpoints and how to reach them.
func (n Network) describe() string {
	if !n.Enabled() {
		return "- No network: HTTP requests, DNS, pip install and npm install all fail. Work with the data you pass in.\n"
	}
	eps := make([]string, len(n.Allow))
	for i, e := range n.Allow {
		eps[i] = e.String()
	}
	return fmt.Sprintf("- Network: only HTTP and HTTPS to these declared endpoints, through a proxy the environment names (HTTP_PROXY, HTTPS_PROXY; Python's urllib and requests, pip, npm, curl and Node's fetch use it): %s. Anything else is refused with 403 and the run's network list says why; raw sockets and DNS lookups fail. At most %s per run, %gs per connection.\n",
		strings.Join(eps, "; "), n.MaxBytes, n.ConnectionSeconds) + n.describeCredentials() + n.Index.describe()
}

// describeCredentials tells the agent that runbox authenticates some
// entries itself, so the code needs no key (and has none to find).
func (n Network) describeCredentials() string {
	if !n.Intercepts() {
		return ""
	}
	var ph []string
	for _, e := range n.Allow {
		if e.Credential != nil {
			if k, _ := e.Credential.PlaceholderEnv(); k != "" {
				ph = append(ph, "$"+k)
			}
		}
	}
	s := "- Endpoints marked \"runbox adds its ... header\" are authenticated by runbox on the way out: send requests to them without a key (there is none in the box to find; whatever the code puts in that header is replaced), over https:// only."
	if len(ph) > 0 {
		s += " For a library that insists on a key, pass " + strings.Join(ph, ", ") + " (a stand-in, not the key)."
	}
	return s + "\n"
}
