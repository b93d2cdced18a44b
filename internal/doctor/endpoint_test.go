package doctor

import (
	"errors"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/internal/enginehost"
)

// A fake machine of each platform, through enginehost, so the paths in
// the messages are that platform's.
func discoveryOn(goos, home string, sockets ...string) Discovery {
	h := enginehost.Host{GOOS: goos, Home: home,
		Getenv: func(string) string { return "" },
		Exists: func(p string) bool {
			for _, s := range sockets {
				if s == p {
					return true
				}
			}
			return false
		}}
	d := Discovery{GOOS: goos, Tried: enginehost.Candidates(h)}
	d.Endpoint, d.Err = enginehost.Find(h)
	return d
}

func TestEndpointCheckPerPlatform(t *testing.T) {
	refused := errors.New("connection refused")
	for _, c := range []struct {
		name    string
		d       Discovery
		ping    error
		status  Status
		detail  []string
		fix     []string
		fixNone bool
	}{
		{name: "macOS Docker Desktop answers", d: discoveryOn("darwin", "/Users/ann", "/Users/ann/.docker/run/docker.sock"),
			status: OK, detail: []string{"Docker Desktop at unix:///Users/ann/.docker/run/docker.sock", "well-known socket"}, fixNone: true},
		{name: "macOS none", d: discoveryOn("darwin", "/Users/ann"), status: Fail,
			detail: []string{"no engine found", "unix:///Users/ann/.docker/run/docker.sock", "unix:///Users/ann/.colima/default/docker.sock", "unix:///Users/ann/.orbstack/run/docker.sock"},
			fix:    []string{"Docker Desktop", "colima start", "podman machine start", "runbox setup"}},
		{name: "macOS Colima stopped", d: discoveryOn("darwin", "/Users/ann", "/Users/ann/.colima/default/docker.sock"), ping: refused, status: Fail,
			detail: []string{"Colima at unix:///Users/ann/.colima/default/docker.sock", "does not answer", "connection refused"}, fix: []string{"colima start"}},
		{name: "Windows none", d: discoveryOn("windows", `C:\Users\ann`), status: Fail,
			detail: []string{"npipe:////./pipe/docker_engine", "npipe:////./pipe/podman-machine-default"},
			fix:    []string{"Docker Desktop", "WSL 2", "podman machine start", "runbox setup"}},
		{name: "Windows Podman machine stopped", d: discoveryOn("windows", `C:\Users\ann`, `\\.\pipe\podman-machine-default`), ping: refused, status: Fail,
			detail: []string{"Podman machine at npipe:////./pipe/podman-machine-default"}, fix: []string{"podman machine start"}},
		{name: "Linux docker.io answers", d: discoveryOn("linux", "/root", "/var/run/docker.sock"), status: OK,
			detail: []string{"Docker at unix:///var/run/docker.sock"}, fixNone: true},
		{name: "Linux docker.io stopped", d: discoveryOn("linux", "/root", "/var/run/docker.sock"), ping: refused, status: Fail,
			fix: []string{"systemctl start docker", "make setup"}},
		{name: "Linux none", d: discoveryOn("linux", "/home/ann"), status: Fail,
			detail: []string{"unix:///var/run/docker.sock", "unix:///home/ann/.docker/desktop/docker.sock", "unix:///run/podman/podman.sock"},
			fix:    []string{"make setup", "podman.socket", "runbox setup"}},
		{name: "broken context", d: Discovery{GOOS: "darwin", Err: errors.New(`docker context "x" (from DOCKER_CONTEXT) is not defined`)}, status: Fail,
			detail: []string{`docker context "x"`}, fix: []string{"docker context use default", "DOCKER_HOST"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := describeEndpoint(c.d, c.ping)
			if got.Status != c.status || got.Name != "engine found" {
				t.Fatalf("%+v", got)
			}
			for _, s := range c.detail {
				if !strings.Contains(got.Detail, s) {
					t.Errorf("detail lacks %q: %s", s, got.Detail)
				}
			}
			for _, s := range c.fix {
				if !strings.Contains(got.Fix, s) {
					t.Errorf("fix lacks %q: %s", s, got.Fix)
				}
			}
			if c.fixNone && got.Fix != "" {
				t.Errorf("a passing check has a fix: %s", got.Fix)
			}
		})
	}
}

func TestSyscallNamesDegradeWithANote(t *testing.T) {
	for _, c := range []struct {
		name                    string
		goos, host, engine, own string
		readable                bool
		status                  Status
		says                    []string
	}{
		{"this machine", "linux", "unix:///var/run/docker.sock", "6.1.0", "6.1.0", true, OK, []string{"available", "/dev/kmsg"}},
		{"not root", "linux", "unix:///var/run/docker.sock", "6.1.0", "6.1.0", false, Warn, []string{"not readable", "SIGSYS"}},
		{"Docker Desktop on Linux", "linux", "unix:///home/ann/.docker/desktop/docker.sock", "6.10.14-linuxkit", "6.1.0", true, OK, []string{"a VM", "SIGSYS"}},
		{"remote engine", "linux", "tcp://build:2376", "6.1.0", "6.1.0", true, OK, []string{"another machine", "SIGSYS"}},
		{"macOS", "darwin", "unix:///Users/ann/.docker/run/docker.sock", "6.10.14-linuxkit", "", false, OK, []string{"macOS", "Linux VM", "killed by SIGSYS", "forbidden_syscall"}},
		{"Windows", "windows", "npipe:////./pipe/docker_engine", "5.15.167.4-microsoft-standard-WSL2", "", false, OK, []string{"Windows", "killed by SIGSYS"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := describeSyscallNames(c.goos, c.host, c.engine, c.own, c.readable)
			if got.Status != c.status || (got.Status == Warn) != (got.Fix != "") {
				t.Fatalf("%+v", got)
			}
			for _, s := range c.says {
				if !strings.Contains(got.Detail, s) {
					t.Errorf("detail lacks %q: %s", s, got.Detail)
				}
			}
		})
	}
}
