package manifest

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Index names the package indexes a box's pip and npm use, so that
// `pip install x` and `npm install x` reach the declared one without the
// program naming it. Each must be reachable through network.allow: an
// index is a convenience, never a permission.
type Index struct {
	// Python is a PEP 503 simple index: PIP_INDEX_URL in the box.
	Python string `json:"python,omitempty" jsonschema_description:"A PEP 503 simple index (e.g. https://pypi.example.com/simple/) that pip uses in a box: PIP_INDEX_URL (and PIP_TRUSTED_HOST for plain http). Its host and port must be allowed by network.allow."`
	// NPM is an npm registry: npm_config_registry in the box.
	NPM string `json:"npm,omitempty" jsonschema_description:"An npm registry (e.g. https://registry.npmjs.org/) that npm uses in a box: npm_config_registry. Its host and port must be allowed by network.allow."`
}

// Env is what a box's environment gains for the declared indexes.
func (x Index) Env() map[string]string {
	env := map[string]string{}
	if x.Python != "" {
		env["PIP_INDEX_URL"] = x.Python
		if u, err := url.Parse(x.Python); err == nil && u.Scheme == "http" {
			// pip ignores a plain-http index on any host but localhost
			// unless it is trusted; the manifest's author chose it.
			env["PIP_TRUSTED_HOST"] = u.Host
		}
	}
	if x.NPM != "" {
		env["npm_config_registry"] = x.NPM
	}
	return env
}

// describe is the tool description's sentence about the indexes, or "".
func (x Index) describe() string {
	var parts []string
	if x.Python != "" {
		parts = append(parts, "pip install installs from "+x.Python)
	}
	if x.NPM != "" {
		parts = append(parts, "npm install from "+x.NPM)
	}
	if len(parts) == 0 {
		return ""
	}
	return "- Packages: " + strings.Join(parts, ", and ") + " (declared package indexes, already configured: no --index-url or --registry needed); pip installs into the user's site under /tmp, npm into /workspace/node_modules, for this run (or the session) only.\n"
}

// Matches says whether the endpoint allows host:port, as the proxy's
// policy decides it (an exact name, a *.domain subdomain, or an address).
func (e Endpoint) Matches(host string, port int) bool {
	if !slices.Contains(e.PortList(), port) {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(e.Host); err == nil {
		b, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == b.Unmap()
	}
	if d, ok := strings.CutPrefix(e.Host, "*."); ok {
		return strings.HasSuffix(host, "."+d)
	}
	return host == e.Host
}

func (n Network) validateIndex(bad func(field string, value any, allowed string)) {
	for _, f := range []struct{ field, url string }{{"network.index.python", n.Index.Python}, {"network.index.npm", n.Index.NPM}} {
		if f.url == "" {
			continue
		}
		u, err := url.Parse(f.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			bad(f.field, f.url, "an http or https URL with a host and no credentials, query or fragment")
			continue
		}
		port := 443
		if u.Scheme == "http" {
			port = 80
		}
		if p := u.Port(); p != "" {
			port, _ = strconv.Atoi(p)
		}
		if !slices.ContainsFunc(n.Allow, func(e Endpoint) bool { return e.Matches(u.Hostname(), port) }) {
			bad(f.field, f.url, "a URL whose host and port an entry of network.allow allows (add {host: "+u.Hostname()+", ports: ["+strconv.Itoa(port)+"]})")
		}
	}
}
