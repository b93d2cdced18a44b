package manifest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesFieldValueAndRange(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Manifest)
		want string
	}{
		{"timeout above max", func(m *Manifest) { m.Limits.TimeoutSeconds = 999 }, "limits.timeout_seconds = 999: from 0.1 to 300"},
		{"memory too small", func(m *Manifest) { m.Limits.Memory = 1 }, "limits.memory = 1B: from 16MiB to 64GiB"},
		{"root user", func(m *Manifest) { m.User = "0:0" }, "user = 0:0: a non-root"},
		{"network wildcard everything", func(m *Manifest) { m.Network.Allow = []Endpoint{{Host: "*"}} }, "network.allow[0].host = *"},
		{"network wildcard tld", func(m *Manifest) { m.Network.Allow = []Endpoint{{Host: "*.com"}} }, "network.allow[0].host = *.com"},
		{"network upper case", func(m *Manifest) { m.Network.Allow = []Endpoint{{Host: "API.example.com"}} }, "network.allow[0].host = API.example.com"},
		{"network port", func(m *Manifest) { m.Network.Allow = []Endpoint{{Host: "a.example", Ports: []int{0}}} }, "network.allow[0].ports = 0: from 1 to 65535"},
		{"network address", func(m *Manifest) {
			m.Network.Allow = []Endpoint{{Host: "a.example", Addresses: []string{"10.0.0.0/33"}}}
		}, "network.allow[0].addresses = 10.0.0.0/33"},
		{"network approve", func(m *Manifest) { m.Network.Allow = []Endpoint{{Host: "a.example", Approve: "yes"}} }, "network.allow[0].approve = yes: empty or ask"},
		{"network hosts", func(m *Manifest) { m.Network.Hosts = map[string]string{"a.example": "nope"} }, "network.hosts.a.example = nope"},
		{"network bytes", func(m *Manifest) { m.Network.MaxBytes = 1 }, "network.max_bytes = 1B"},
		{"isolation", func(m *Manifest) { m.Isolation = "kata" }, "isolation = kata: runc or gvisor"},
		{"duplicate language", func(m *Manifest) { m.Languages = append(m.Languages, m.Languages[0]) }, "languages[4].name = python: unique"},
		{"command without file", func(m *Manifest) { m.Languages[0].Command = []string{"python3"} }, "languages[0].command"},
		{"file with slash", func(m *Manifest) { m.Languages[0].File = "../x.py" }, "languages[0].file"},
		{"origin with a path", func(m *Manifest) {
			m.HTTP.AllowedOrigins = []string{"https://ok.example", "https://runbox.example.com/"}
		}, "http.allowed_origins[1] = https://runbox.example.com/: an origin"},
		{"origin without scheme", func(m *Manifest) { m.HTTP.AllowedOrigins = []string{"runbox.example.com"} }, "http.allowed_origins[0] = runbox.example.com"},
		{"origin wildcard", func(m *Manifest) { m.HTTP.AllowedOrigins = []string{"*"} }, "http.allowed_origins[0] = *"},
		{"folder named roots", func(m *Manifest) { m.Mounts = []Mount{{Name: "roots", Path: "/srv/data"}} }, "mounts[0].name = roots: a name other than roots"},
		{"origin bad port", func(m *Manifest) { m.HTTP.AllowedOrigins = []string{"http://localhost:99999"} }, "http.allowed_origins[0]"},
		{"request body too small", func(m *Manifest) { m.HTTP.MaxRequestBytes = 1024 }, "http.max_request_bytes"},
		{"no connection per address", func(m *Manifest) { m.HTTP.MaxConnectionsPerAddress = 0 }, "http.max_connections_per_address"},
		{"type_check on javascript", func(m *Manifest) { f := false; m.Languages[1].TypeCheck = &f }, "languages[1].type_check = false: only with error_format typescript"},
		{"no unauthenticated connection", func(m *Manifest) { m.HTTP.MaxUnauthenticatedConnections = 0 }, "http.max_unauthenticated_connections"},
	}
	for _, tc := range cases {
		m := Default()
		tc.edit(m)
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{`"64MiB"`: 64 * MiB, `"1.5GiB"`: GiB + GiB/2, `"100B"`: 100, `2048`: 2048, `"7"`: 7} {
		var b ByteSize
		if err := json.Unmarshal([]byte(in), &b); err != nil || b != want {
			t.Errorf("%s: got %v, %v", in, b, err)
		}
	}
	for _, in := range []string{`"-1MiB"`, `"ten"`, `-5`, `"5 TB"`} {
		var b ByteSize
		if err := json.Unmarshal([]byte(in), &b); err == nil {
			t.Errorf("%s: accepted as %d", in, b)
		}
	}
	if s := (64 * MiB).String(); s != "64MiB" {
		t.Errorf("String: %s", s)
	}
}

func TestLoadOverlaysDefaults(t *testing.T) {
	p := t.TempDir() + "/runbox.yaml"
	writeFile(t, p, "limits:\n  memory: 256MiB\n  timeout_seconds: 5\nconcurrency: 2\n")
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits.Memory != 256*MiB || m.Limits.TimeoutSeconds != 5 || m.Concurrency != 2 || m.Limits.Pids != Default().Limits.Pids || len(m.Languages) != 4 {
		t.Fatalf("got %+v", m.Limits)
	}
}

func TestLoadAllowedOrigins(t *testing.T) {
	p := t.TempDir() + "/runbox.yaml"
	writeFile(t, p, "http:\n  allowed_origins: [\"https://runbox.example.com\", \"http://localhost:6274\"]\n")
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.HTTP.AllowedOrigins; len(got) != 2 || got[0] != "https://runbox.example.com" || got[1] != "http://localhost:6274" {
		t.Fatalf("allowed_origins: %q", got)
	}
	if d := Default().HTTP.AllowedOrigins; d == nil || len(d) != 0 {
		t.Fatalf("default allowed_origins: %#v, want an empty list", d)
	}
}

func TestLoadRejectsUnknownAndInvalid(t *testing.T) {
	for content, want := range map[string]string{
		"limits:\n  memroy: 1GiB\n": "unknown field",
		"limits:\n  memory: 1MiB\n": "limits.memory = 1MiB",
		"concurrency: many\n":       "concurrency",
		"limits:\n  memory: lots\n": "bad size",
		"roots:\n  mount: true\n":   "roots.under",
		"roots:\n  under: [rel]\n":  "roots.under[0]",
		"roots:\n  under: [/]\n":    "roots.under[0]",
		"backend: runc\n":           "docker, oci or kubernetes",
	} {
		p := t.TempDir() + "/runbox.yaml"
		writeFile(t, p, content)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", content, err, want)
		}
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEffectiveManifestRoundTrips(t *testing.T) {
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	p := t.TempDir() + "/effective.json"
	writeFile(t, p, string(b))
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(m)
	if string(again) != string(b) || !strings.Contains(string(b), `"memory":"512MiB"`) {
		t.Fatalf("round trip:\n%s\n%s", b, again)
	}
}

func TestLoadDefault(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if m, src, err := LoadDefault(""); err != nil || src != "" || m.Concurrency != Default().Concurrency {
		t.Fatalf("no file: %v %q", err, src)
	}
	writeFile(t, DefaultPath, "concurrency: 7\n")
	if m, src, err := LoadDefault(""); err != nil || src != DefaultPath || m.Concurrency != 7 {
		t.Fatalf("./runbox.yaml: %v %q", err, src)
	}
	if _, _, err := LoadDefault(dir + "/missing.yaml"); err == nil {
		t.Fatal("a named missing file is accepted")
	}
}

// Long runs: a timeout may be up to a day; the bound before a handle is
// at most an hour, 0 included (calls wait); a client's cap is at most the
// server's.
func TestLongRunLimits(t *testing.T) {
	for _, c := range []struct {
		set   func(*Limits)
		field string
	}{
		{func(l *Limits) { l.MaxTimeoutSeconds = 24*3600 + 1 }, "limits.max_timeout_seconds"},
		{func(l *Limits) { l.AnswerWithinSeconds = -1 }, "limits.answer_within_seconds"},
		{func(l *Limits) { l.MaxBackgroundRunsPerClient = 17 }, "limits.max_background_runs_per_client"},
		{func(l *Limits) { l.MaxBackgroundRuns = -1; l.MaxBackgroundRunsPerClient = 0 }, "limits.max_background_runs"},
	} {
		m := Default()
		c.set(&m.Limits)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	m := Default()
	m.Limits.MaxTimeoutSeconds, m.Limits.TimeoutSeconds, m.Limits.AnswerWithinSeconds = 24*3600, 7200, 0
	if err := m.Validate(); err != nil {
		t.Fatalf("a day's timeout, no handle: %v", err)
	}
}
