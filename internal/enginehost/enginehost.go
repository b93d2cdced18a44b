package enginehost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Host is what discovery reads of the machine.
type Host struct {
	// GOOS is linux, darwin or windows (others are treated as linux).
	GOOS string
	// Home is the user's home directory, in the platform's own form.
	Home string
	// Getenv reads the environment; nil reads nothing.
	Getenv func(string) string
	// Exists says whether a socket or named pipe is there (a dangling
	// symbolic link is not).
	Exists func(path string) bool
	// ReadFile reads Docker's configuration files.
	ReadFile func(path string) ([]byte, error)
}

func (h Host) env(key string) string {
	if h.Getenv == nil {
		return ""
	}
	return h.Getenv(key)
}

// Endpoint is an engine's address, in DOCKER_HOST's form.
type Endpoint struct {
	// Host is the address: unix:///…, npipe:////./pipe/…, tcp://….
	Host string `json:"host"`
	// Engine names who listens there, as far as the address tells
	// (a path under ~/.orbstack is OrbStack's); "" when it does not.
	Engine string `json:"engine,omitempty"`
	// Source says how it was found: "DOCKER_HOST", "docker context
	// NAME" or "well-known socket".
	Source string `json:"source"`
	// CertPath and TLSVerify are a Docker context's TLS material, for
	// DOCKER_CERT_PATH and DOCKER_TLS_VERIFY.
	CertPath  string `json:"cert_path,omitempty"`
	TLSVerify bool   `json:"tls_verify,omitempty"`
	// path is what Exists is asked about.
	path string
}

// Sources of an Endpoint.
const (
	SourceEnv    = "DOCKER_HOST"
	SourceSocket = "well-known socket"
)

// ErrNotFound says that no engine was found: nothing set, no context, and
// none of the platform's sockets or pipes exists.
var ErrNotFound = errors.New("no container engine found")

// Find returns the engine to use: DOCKER_HOST when set; the current
// Docker context when one is chosen (DOCKER_CONTEXT, or currentContext in
// Docker's config.json) and it is not "default"; else the first of
// Candidates that exists. A chosen context that cannot be used is an
// error (the docker CLI refuses it too); nothing found is ErrNotFound.
func Find(h Host) (Endpoint, error) {
	if v := h.env("DOCKER_HOST"); v != "" {
		return Endpoint{Host: v, Engine: engineAt(h, v), Source: SourceEnv}, nil
	}
	ep, ok, err := currentContext(h)
	if err != nil || ok {
		return ep, err
	}
	for _, c := range Candidates(h) {
		if h.Exists != nil && h.Exists(c.path) {
			return c, nil
		}
	}
	return Endpoint{}, ErrNotFound
}

// Candidates lists the platform's well-known engine addresses in the
// order Find tries them.
func Candidates(h Host) []Endpoint {
	home := func(p ...string) string { return joinPath(h.GOOS, append([]string{h.Home}, p...)...) }
	var out []Endpoint
	sock := func(p, engine string) {
		out = append(out, Endpoint{Host: "unix://" + p, Engine: engine, Source: SourceSocket, path: p})
	}
	runtimeDir := h.env("XDG_RUNTIME_DIR")
	colima := h.env("COLIMA_HOME")
	if colima == "" {
		colima = home(".colima")
	}
	switch h.GOOS {
	case "windows":
		for _, p := range []struct{ pipe, engine string }{
			{"docker_engine", "Docker Desktop"},
			{"podman-machine-default", "Podman machine"},
			{"dockerDesktopLinuxEngine", "Docker Desktop"},
		} {
			out = append(out, Endpoint{Host: "npipe:////./pipe/" + p.pipe, Engine: p.engine, Source: SourceSocket, path: `\\.\pipe\` + p.pipe})
		}
	case "darwin":
		sock(home(".docker", "run", "docker.sock"), "Docker Desktop")
		sock(home(".orbstack", "run", "docker.sock"), "OrbStack")
		sock(colima+"/default/docker.sock", "Colima")
		sock(home(".rd", "docker.sock"), "Rancher Desktop")
		if tmp := strings.TrimSuffix(h.env("TMPDIR"), "/"); tmp != "" {
			sock(tmp+"/podman/podman-machine-default-api.sock", "Podman machine")
		}
		sock(home(".local", "share", "containers", "podman", "machine", "podman.sock"), "Podman machine")
		sock(home(".local", "share", "containers", "podman", "machine", "qemu", "podman.sock"), "Podman machine")
		// Docker Desktop's (or Podman's mac helper's) system-wide link.
		sock("/var/run/docker.sock", "")
	default:
		sock("/var/run/docker.sock", "Docker")
		sock(home(".docker", "desktop", "docker.sock"), "Docker Desktop")
		if runtimeDir != "" {
			sock(runtimeDir+"/docker.sock", "Docker (rootless)")
		}
		sock(colima+"/default/docker.sock", "Colima")
		sock(home(".rd", "docker.sock"), "Rancher Desktop")
		sock("/run/podman/podman.sock", "Podman")
		if runtimeDir != "" {
			sock(runtimeDir+"/podman/podman.sock", "Podman (rootless)")
		}
	}
	return out
}

// engineAt names the engine of a well-known address; "" for others.
func engineAt(h Host, host string) string {
	for _, c := range Candidates(h) {
		if c.Host == host {
			return c.Engine
		}
	}
	return ""
}

// currentContext reads the Docker context the docker CLI would use.
func currentContext(h Host) (Endpoint, bool, error) {
	dir := h.env("DOCKER_CONFIG")
	if dir == "" {
		dir = joinPath(h.GOOS, h.Home, ".docker")
	}
	name, from := h.env("DOCKER_CONTEXT"), "DOCKER_CONTEXT"
	if name == "" && h.ReadFile != nil {
		from = joinPath(h.GOOS, dir, "config.json")
		if b, err := h.ReadFile(from); err == nil {
			var cfg struct {
				CurrentContext string `json:"currentContext"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil {
				return Endpoint{}, false, fmt.Errorf("%s is not valid JSON: %w", from, err)
			}
			name = cfg.CurrentContext
		}
	}
	if name == "" || name == "default" {
		return Endpoint{}, false, nil
	}
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	metaPath := joinPath(h.GOOS, dir, "contexts", "meta", id, "meta.json")
	var b []byte
	err := errors.New("cannot read files")
	if h.ReadFile != nil {
		b, err = h.ReadFile(metaPath)
	}
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("docker context %q (from %s) is not defined: %s is missing", name, from, metaPath)
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return Endpoint{}, false, fmt.Errorf("docker context %q: %s is not valid JSON: %w", name, metaPath, err)
	}
	d, ok := meta.Endpoints["docker"]
	if !ok || d.Host == "" {
		return Endpoint{}, false, fmt.Errorf("docker context %q has no docker endpoint (%s)", name, metaPath)
	}
	if strings.HasPrefix(d.Host, "ssh://") {
		return Endpoint{}, false, fmt.Errorf("docker context %q reaches its engine over ssh (%s), which runbox cannot dial: set DOCKER_HOST to a unix socket or tcp address (e.g. forward the engine's socket with ssh -L)", name, d.Host)
	}
	ep := Endpoint{Host: d.Host, Engine: engineAt(h, d.Host), Source: "docker context " + name}
	tls := joinPath(h.GOOS, dir, "contexts", "tls", id, "docker")
	if h.ReadFile != nil {
		if _, err := h.ReadFile(joinPath(h.GOOS, tls, "ca.pem")); err == nil {
			ep.CertPath, ep.TLSVerify = tls, !d.SkipTLSVerify
		}
	}
	return ep, true, nil
}

// joinPath joins in the platform's form (path/filepath would use this
// machine's).
func joinPath(goos string, elem ...string) string {
	if goos != "windows" {
		return path.Join(elem...)
	}
	var parts []string
	for i, e := range elem {
		e = strings.ReplaceAll(e, "/", `\`)
		if i > 0 {
			e = strings.Trim(e, `\`)
		} else {
			e = strings.TrimRight(e, `\`)
		}
		if e != "" {
			parts = append(parts, e)
		}
	}
	return strings.Join(parts, `\`)
}
