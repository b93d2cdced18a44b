package enginehost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// machine is a fake Host: files by path, sockets by path, environment.
type machine struct {
	goos    string
	home    string
	env     map[string]string
	files   map[string]string
	sockets []string
}

func (m machine) host() Host {
	return Host{
		GOOS: m.goos, Home: m.home,
		Getenv: func(k string) string { return m.env[k] },
		Exists: func(p string) bool {
			for _, s := range m.sockets {
				if s == p {
					return true
				}
			}
			return false
		},
		ReadFile: func(p string) ([]byte, error) {
			if b, ok := m.files[p]; ok {
				return []byte(b), nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

func contextID(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])
}

func TestFindWellKnownSockets(t *testing.T) {
	for _, c := range []struct {
		name    string
		m       machine
		host    string
		engine  string
		orNone  bool
		comment string
	}{
		{name: "linux docker.io", m: machine{goos: "linux", home: "/root", sockets: []string{"/var/run/docker.sock"}},
			host: "unix:///var/run/docker.sock", engine: "Docker"},
		{name: "linux Docker Desktop", m: machine{goos: "linux", home: "/home/ann", sockets: []string{"/home/ann/.docker/desktop/docker.sock"}},
			host: "unix:///home/ann/.docker/desktop/docker.sock", engine: "Docker Desktop"},
		{name: "linux rootless podman", m: machine{goos: "linux", home: "/home/ann", env: map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, sockets: []string{"/run/user/1000/podman/podman.sock"}},
			host: "unix:///run/user/1000/podman/podman.sock", engine: "Podman (rootless)"},
		{name: "linux rootful podman", m: machine{goos: "linux", home: "/root", sockets: []string{"/run/podman/podman.sock"}},
			host: "unix:///run/podman/podman.sock", engine: "Podman"},
		{name: "linux docker.io wins over podman", m: machine{goos: "linux", home: "/root", sockets: []string{"/run/podman/podman.sock", "/var/run/docker.sock"}},
			host: "unix:///var/run/docker.sock", engine: "Docker"},
		{name: "linux nothing", m: machine{goos: "linux", home: "/root"}, orNone: true},

		{name: "macOS Docker Desktop", m: machine{goos: "darwin", home: "/Users/ann", sockets: []string{"/Users/ann/.docker/run/docker.sock", "/var/run/docker.sock"}},
			host: "unix:///Users/ann/.docker/run/docker.sock", engine: "Docker Desktop"},
		{name: "macOS Colima", m: machine{goos: "darwin", home: "/Users/ann", sockets: []string{"/Users/ann/.colima/default/docker.sock"}},
			host: "unix:///Users/ann/.colima/default/docker.sock", engine: "Colima"},
		{name: "macOS Colima elsewhere", m: machine{goos: "darwin", home: "/Users/ann", env: map[string]string{"COLIMA_HOME": "/opt/colima"}, sockets: []string{"/opt/colima/default/docker.sock"}},
			host: "unix:///opt/colima/default/docker.sock", engine: "Colima"},
		{name: "macOS OrbStack", m: machine{goos: "darwin", home: "/Users/ann", sockets: []string{"/Users/ann/.orbstack/run/docker.sock"}},
			host: "unix:///Users/ann/.orbstack/run/docker.sock", engine: "OrbStack"},
		{name: "macOS Rancher Desktop", m: machine{goos: "darwin", home: "/Users/ann", sockets: []string{"/Users/ann/.rd/docker.sock"}},
			host: "unix:///Users/ann/.rd/docker.sock", engine: "Rancher Desktop"},
		{name: "macOS Podman 5 machine", m: machine{goos: "darwin", home: "/Users/ann", env: map[string]string{"TMPDIR": "/var/folders/x1/abc/T/"}, sockets: []string{"/var/folders/x1/abc/T/podman/podman-machine-default-api.sock"}},
			host: "unix:///var/folders/x1/abc/T/podman/podman-machine-default-api.sock", engine: "Podman machine"},
		{name: "macOS Podman 4 machine", m: machine{goos: "darwin", home: "/Users/ann", sockets: []string{"/Users/ann/.local/share/containers/podman/machine/podman.sock"}},
			host: "unix:///Users/ann/.local/share/containers/podman/machine/podman.sock", engine: "Podman machine"},
		{name: "macOS system link only", m: machine{goos: "darwin", home: "/Users/ann", sockets: []string{"/var/run/docker.sock"}},
			host: "unix:///var/run/docker.sock", engine: ""},
		{name: "macOS nothing", m: machine{goos: "darwin", home: "/Users/ann"}, orNone: true},

		{name: "Windows Docker Desktop", m: machine{goos: "windows", home: `C:\Users\ann`, sockets: []string{`\\.\pipe\docker_engine`}},
			host: "npipe:////./pipe/docker_engine", engine: "Docker Desktop"},
		{name: "Windows Podman machine", m: machine{goos: "windows", home: `C:\Users\ann`, sockets: []string{`\\.\pipe\podman-machine-default`}},
			host: "npipe:////./pipe/podman-machine-default", engine: "Podman machine"},
		{name: "Windows nothing", m: machine{goos: "windows", home: `C:\Users\ann`}, orNone: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep, err := Find(c.m.host())
			if c.orNone {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("want ErrNotFound, got %+v, %v", ep, err)
				}
				return
			}
			if err != nil || ep.Host != c.host || ep.Engine != c.engine || ep.Source != SourceSocket {
				t.Fatalf("got %+v, %v; want %s (%q)", ep, err, c.host, c.engine)
			}
		})
	}
}

func TestFindDockerHostFirst(t *testing.T) {
	m := machine{goos: "darwin", home: "/Users/ann",
		env:     map[string]string{"DOCKER_HOST": "unix:///Users/ann/.colima/default/docker.sock", "DOCKER_CONTEXT": "nonexistent"},
		sockets: []string{"/Users/ann/.docker/run/docker.sock"}}
	ep, err := Find(m.host())
	if err != nil || ep.Host != "unix:///Users/ann/.colima/default/docker.sock" || ep.Source != SourceEnv || ep.Engine != "Colima" {
		t.Fatalf("%+v %v", ep, err)
	}
}

func TestFindDockerContext(t *testing.T) {
	meta := func(host string, skip bool) string {
		s := `{"Name":"x","Metadata":{},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
		if skip {
			s = strings.Replace(s, `"SkipTLSVerify":false`, `"SkipTLSVerify":true`, 1)
		}
		return s
	}
	desktop := contextID("desktop-linux")
	t.Run("macOS desktop-linux from config.json", func(t *testing.T) {
		m := machine{goos: "darwin", home: "/Users/ann", files: map[string]string{
			"/Users/ann/.docker/config.json":                             `{"auths":{},"currentContext":"desktop-linux"}`,
			"/Users/ann/.docker/contexts/meta/" + desktop + "/meta.json": meta("unix:///Users/ann/.docker/run/docker.sock", false),
		}, sockets: []string{"/var/run/docker.sock"}}
		ep, err := Find(m.host())
		if err != nil || ep.Host != "unix:///Users/ann/.docker/run/docker.sock" || ep.Source != "docker context desktop-linux" || ep.Engine != "Docker Desktop" || ep.CertPath != "" {
			t.Fatalf("%+v %v", ep, err)
		}
	})
	t.Run("DOCKER_CONTEXT over config.json, DOCKER_CONFIG elsewhere, TLS", func(t *testing.T) {
		id := contextID("remote")
		m := machine{goos: "linux", home: "/home/ann", env: map[string]string{"DOCKER_CONTEXT": "remote", "DOCKER_CONFIG": "/etc/dockercfg"}, files: map[string]string{
			"/etc/dockercfg/config.json":                           `{"currentContext":"desktop-linux"}`,
			"/etc/dockercfg/contexts/meta/" + id + "/meta.json":    meta("tcp://build.example:2376", false),
			"/etc/dockercfg/contexts/tls/" + id + "/docker/ca.pem": "pem",
		}}
		ep, err := Find(m.host())
		if err != nil || ep.Host != "tcp://build.example:2376" || !ep.TLSVerify || ep.CertPath != "/etc/dockercfg/contexts/tls/"+id+"/docker" {
			t.Fatalf("%+v %v", ep, err)
		}
	})
	t.Run("Windows context", func(t *testing.T) {
		m := machine{goos: "windows", home: `C:\Users\ann`, files: map[string]string{
			`C:\Users\ann\.docker\config.json`:                             `{"currentContext":"desktop-linux"}`,
			`C:\Users\ann\.docker\contexts\meta\` + desktop + `\meta.json`: meta("npipe:////./pipe/dockerDesktopLinuxEngine", false),
		}}
		ep, err := Find(m.host())
		if err != nil || ep.Host != "npipe:////./pipe/dockerDesktopLinuxEngine" || ep.Engine != "Docker Desktop" {
			t.Fatalf("%+v %v", ep, err)
		}
	})
	t.Run("default context means the sockets", func(t *testing.T) {
		m := machine{goos: "linux", home: "/root", files: map[string]string{"/root/.docker/config.json": `{"currentContext":"default"}`},
			sockets: []string{"/var/run/docker.sock"}}
		if ep, err := Find(m.host()); err != nil || ep.Source != SourceSocket {
			t.Fatalf("%+v %v", ep, err)
		}
	})
	for _, c := range []struct {
		name  string
		m     machine
		says  string
		wrong bool
	}{
		{name: "undefined context", m: machine{goos: "linux", home: "/root", env: map[string]string{"DOCKER_CONTEXT": "gone"}}, says: `docker context "gone" (from DOCKER_CONTEXT) is not defined`},
		{name: "ssh context", m: machine{goos: "linux", home: "/root", env: map[string]string{"DOCKER_CONTEXT": "ssh"}, files: map[string]string{
			"/root/.docker/contexts/meta/" + contextID("ssh") + "/meta.json": meta("ssh://me@box", false)}}, says: "over ssh"},
		{name: "broken config.json", m: machine{goos: "darwin", home: "/Users/ann", files: map[string]string{"/Users/ann/.docker/config.json": `{"currentContext":`}}, says: "not valid JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Find(c.m.host())
			if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err %v, want one saying %q", err, c.says)
			}
		})
	}
}

func TestJoinPath(t *testing.T) {
	if got := joinPath("windows", `C:\Users\ann\`, ".docker", "config.json"); got != `C:\Users\ann\.docker\config.json` {
		t.Error(got)
	}
	if got := joinPath("darwin", "/Users/ann", ".docker", "config.json"); got != "/Users/ann/.docker/config.json" {
		t.Error(got)
	}
}
