package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNetworkForms(t *testing.T) {
	cases := []struct {
		name, yaml string
		allow      int
		err        string
	}{
		{"legacy none", "network: none\n", 0, ""},
		{"legacy other", "network: bridge\n", 0, `"bridge": none, or an object`},
		{"object", "network:\n  allow:\n    - host: api.example.com\n      ports: [443]\n    - host: \"*.pypi.org\"\n    - host: 127.0.0.1\n      ports: [8443]\n", 3, ""},
		{"unknown field", "network:\n  allow: []\n  open: true\n", 0, `unknown field "open"`},
		{"unknown entry field", "network:\n  allow:\n    - host: a.example\n      port: 1\n", 0, `unknown field "port"`},
		{"ip and names", "network:\n  allow:\n    - host: svc.internal\n      addresses: [10.0.0.0/8, \"::1\"]\n  hosts:\n    svc.internal: 10.1.2.3\n", 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "runbox.yaml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := Load(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Network.Allow) != tc.allow || m.Network.Enabled() != (tc.allow > 0) {
				t.Fatalf("allow = %+v", m.Network.Allow)
			}
			if m.Network.MaxBytes != 64*MiB || m.Network.MaxConnections != 256 {
				t.Fatalf("defaults lost: %+v", m.Network)
			}
		})
	}
}

func TestEndpointString(t *testing.T) {
	if s := (Endpoint{Host: "a.example"}).String(); s != "a.example:80,443" {
		t.Fatal(s)
	}
	if s := (Endpoint{Host: "*.b.example", Ports: []int{8443}, Approve: ApproveAsk}).String(); s != "*.b.example:8443 (asks the user first)" {
		t.Fatal(s)
	}
}
