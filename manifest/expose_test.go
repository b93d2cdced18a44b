package manifest

import (
	"strings"
	"testing"
)

func TestExposeIsOffAndOnLoopbackByDefault(t *testing.T) {
	e := Default().Sessions.Expose
	if e.Enabled || e.Listen != "127.0.0.1" || e.URLHost() != "127.0.0.1" || e.MaxPerSession < 1 || e.MaxConnections < 1 || e.AnswerWithinSeconds < 1 {
		t.Fatalf("default %+v", e)
	}
	e.Host = "preview.example"
	if e.URLHost() != "preview.example" {
		t.Fatalf("host: %s", e.URLHost())
	}
}

func TestExposeValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Expose)
		want string
	}{
		{"a name to listen on", func(e *Expose) { e.Listen = "localhost" }, "sessions.expose.listen = localhost: an IP address"},
		{"no exposure", func(e *Expose) { e.MaxPerSession = 0 }, "sessions.expose.max_per_session = 0: from 1 to 64"},
		{"no connection", func(e *Expose) { e.MaxConnections = 0 }, "sessions.expose.max_connections = 0"},
		{"no wait for an answer", func(e *Expose) { e.AnswerWithinSeconds = 0 }, "sessions.expose.answer_within_seconds = 0: from 1 to 3600"},
		{"a port", func(e *Expose) { e.Ports = []int{8100, 70000} }, "sessions.expose.ports[1] = 70000: from 1 to 65535"},
		{"a host with a path", func(e *Expose) { e.Host = "a.example/x" }, "sessions.expose.host = a.example/x"},
	} {
		m := Default()
		tc.edit(&m.Sessions.Expose)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
