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
			m := loadCase(t, tc.yaml, tc.err)
			if m == nil {
				return
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

// The agent is told exactly which endpoints exist, or that none do.
func TestToolDescriptionNetwork(t *testing.T) {
	m := Default()
	if d := m.Describe(); !strings.Contains(d, "No network") {
		t.Fatalf("without endpoints:\n%s", d)
	}
	m.Network.Allow = []Endpoint{{Host: "api.example.com", Ports: []int{443}}, {Host: "*.pypi.example", Approve: ApproveAsk}}
	d := m.Describe()
	for _, want := range []string{"only HTTP and HTTPS to these declared endpoints", "api.example.com:443; *.pypi.example:80,443 (asks the user first)", "HTTPS_PROXY"} {
		if !strings.Contains(d, want) {
			t.Errorf("missing %q in:\n%s", want, d)
		}
	}
	if strings.Contains(d, "No network") {
		t.Errorf("still says no network:\n%s", d)
	}
}

// loadCase loads yaml as a manifest file. With wantErr, loading must fail
// with an error that says it, and loadCase returns nil; without, it must
// load.
func loadCase(t *testing.T, yaml, wantErr string) *Manifest {
	t.Helper()
	p := filepath.Join(t.TempDir(), "runbox.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(p)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want %q", err, wantErr)
		}
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}
