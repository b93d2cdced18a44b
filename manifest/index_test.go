package manifest

import (
	"maps"
	"strings"
	"testing"
)

// An index must be an http(s) URL that network.allow lets the box reach;
// the box's environment names it for pip and npm.
func TestNetworkIndex(t *testing.T) {
	const allow = "network:\n  allow:\n    - host: pypi.example.com\n    - host: \"*.npm.example\"\n      ports: [8443]\n    - host: 127.0.0.1\n      ports: [9000]\n  index:\n"
	cases := []struct {
		name, index string
		env         map[string]string
		err         string
	}{
		{"https by name", "    python: https://pypi.example.com/simple/\n", map[string]string{"PIP_INDEX_URL": "https://pypi.example.com/simple/"}, ""},
		{"http is trusted by pip", "    python: http://pypi.example.com/simple/\n", map[string]string{"PIP_INDEX_URL": "http://pypi.example.com/simple/", "PIP_TRUSTED_HOST": "pypi.example.com"}, ""},
		{"wildcard and port", "    npm: https://registry.npm.example:8443/\n", map[string]string{"npm_config_registry": "https://registry.npm.example:8443/"}, ""},
		{"address", "    python: http://127.0.0.1:9000/simple/\n    npm: http://127.0.0.1:9000/npm/\n", map[string]string{"PIP_INDEX_URL": "http://127.0.0.1:9000/simple/", "PIP_TRUSTED_HOST": "127.0.0.1:9000", "npm_config_registry": "http://127.0.0.1:9000/npm/"}, ""},
		{"undeclared host", "    python: https://pypi.org/simple/\n", nil, "network.index.python = https://pypi.org/simple/: a URL whose host and port an entry of network.allow allows (add {host: pypi.org, ports: [443]})"},
		{"undeclared port", "    npm: https://registry.npm.example/\n", nil, "network.index.npm"},
		{"wildcard is not the domain", "    npm: https://npm.example:8443/\n", nil, "network.index.npm"},
		{"not http", "    python: ftp://pypi.example.com/\n", nil, "an http or https URL"},
		{"credentials", "    python: https://user:secret@pypi.example.com/simple/\n", nil, "no credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadCase(t, allow+tc.index, tc.err)
			if m == nil {
				return
			}
			if env := m.Network.Index.Env(); !maps.Equal(env, tc.env) {
				t.Fatalf("env %v, want %v", env, tc.env)
			}
		})
	}
}

// The agent is told where packages come from when an index is declared,
// and that nothing can be installed when none is.
func TestToolDescriptionIndex(t *testing.T) {
	m := Default()
	m.Network.Allow = []Endpoint{{Host: "pypi.example.com"}}
	if d := m.Describe(); !strings.Contains(d, "nothing else can be installed") || strings.Contains(d, "Packages:") {
		t.Fatalf("without an index:\n%s", d)
	}
	m.Network.Index = Index{Python: "https://pypi.example.com/simple/"}
	d := m.Describe()
	for _, want := range []string{"more only from the declared package indexes", "- Packages: pip install installs from https://pypi.example.com/simple/ (declared package indexes, already configured"} {
		if !strings.Contains(d, want) {
			t.Errorf("missing %q in:\n%s", want, d)
		}
	}
}
