package egress

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestPolicyMatch(t *testing.T) {
	p := NewPolicy(manifest.Network{Allow: []manifest.Endpoint{
		{Host: "api.example.com", Ports: []int{443}},
		{Host: "*.pypi.example"},
		{Host: "127.0.0.1", Ports: []int{8443}},
		{Host: "::1", Ports: []int{9000}},
	}})
	cases := []struct {
		host string
		port int
		want int // -1: refused
	}{
		{"api.example.com", 443, 0},
		{"API.Example.COM.", 443, 0},
		{"api.example.com", 80, -1},
		{"x.api.example.com", 443, -1},
		{"example.com", 443, -1},
		{"files.pypi.example", 443, 1},
		{"a.b.pypi.example", 80, 1},
		{"pypi.example", 443, -1},
		{"evilpypi.example", 443, -1},
		{"files.pypi.example", 8080, -1},
		{"127.0.0.1", 8443, 2},
		{"127.0.0.1", 443, -1},
		{"::ffff:127.0.0.1", 8443, 2},
		{"127.0.0.2", 8443, -1},
		{"[::1]", 9000, 3},
		{"localhost", 8443, -1},
	}
	for _, tc := range cases {
		m, ok := p.Match(tc.host, tc.port)
		got := -1
		if ok {
			got = m.Index
		}
		if got != tc.want {
			t.Errorf("Match(%q, %d) = %d, want %d", tc.host, tc.port, got, tc.want)
		}
	}
}

func TestPermits(t *testing.T) {
	p := NewPolicy(manifest.Network{Allow: []manifest.Endpoint{
		{Host: "public.example"},
		{Host: "svc.internal", Addresses: []string{"10.0.0.0/8"}},
		{Host: "127.0.0.1"},
		{Host: "local.test", Addresses: []string{"127.0.0.1"}},
	}})
	cases := []struct {
		host, addr string
		ok         bool
		why        string
	}{
		{"public.example", "93.184.216.34", true, ""},
		{"public.example", "127.0.0.1", false, "a loopback address"},
		{"public.example", "169.254.169.254", false, "a cloud-metadata address"},
		{"public.example", "::ffff:169.254.169.254", false, "cloud-metadata"},
		{"public.example", "10.1.2.3", false, "a private address"},
		{"public.example", "192.168.0.1", false, "private"},
		{"public.example", "fe80::1", false, "link-local"},
		{"public.example", "fd00:ec2::254", false, "cloud-metadata"},
		{"public.example", "0.0.0.0", false, "unspecified"},
		{"public.example", "100.64.0.1", false, "carrier-grade"},
		{"public.example", "64:ff9b::a9fe:a9fe", false, "NAT64"},
		{"public.example", "::1", false, "loopback"},
		{"svc.internal", "10.9.9.9", true, ""},
		{"svc.internal", "127.0.0.1", false, "loopback"},
		{"svc.internal", "93.184.216.34", false, "outside the entry's addresses"},
		{"127.0.0.1", "127.0.0.1", true, ""},
		{"local.test", "127.0.0.1", true, ""},
		{"local.test", "127.0.0.2", false, "loopback"},
	}
	for _, tc := range cases {
		m, ok := p.Match(tc.host, 443)
		if !ok {
			t.Fatalf("%s not matched", tc.host)
		}
		ok, why := m.Permits(netip.MustParseAddr(tc.addr))
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s -> %s: %v %q, want %v %q", tc.host, tc.addr, ok, why, tc.ok, tc.why)
		}
	}
}
