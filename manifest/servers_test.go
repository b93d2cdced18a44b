package manifest

import (
	"strings"
	"testing"
)

func TestServersValidate(t *testing.T) {
	cases := []struct {
		name    string
		servers []Server
		want    string
	}{
		{"stdio", []Server{{Name: "memory", Command: "mcp-server-memory", Env: map[string]string{"TOKEN": "RUNBOX_TOKEN"}}}, ""},
		{"http", []Server{{Name: "web-1", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "AUTH"}, Connect: ConnectFirstUse}}, ""},
		{"neither", []Server{{Name: "x"}}, "exactly one of command"},
		{"both", []Server{{Name: "x", Command: "a", URL: "http://h/"}}, "exactly one of command"},
		{"bad name", []Server{{Name: "X y", Command: "a"}}, "servers[0].name"},
		{"same identifier", []Server{{Name: "a-b", Command: "a"}, {Name: "a_b", Command: "a"}}, "unique"},
		{"a library name", []Server{{Name: "call", Command: "a"}}, "libraries' own names"},
		{"bad url", []Server{{Name: "x", URL: "ftp://h/"}}, "servers[0].url"},
		{"headers on stdio", []Server{{Name: "x", Command: "a", Headers: map[string]string{"A": "B"}}}, "only with url"},
		{"env on http", []Server{{Name: "x", URL: "http://h/", Env: map[string]string{"A": "B"}}}, "only with command"},
		{"bad glob", []Server{{Name: "x", Command: "a", Deny: []string{"["}}}, "a glob"},
		{"bad connect", []Server{{Name: "x", Command: "a", Connect: "later"}}, "startup or first_use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := Default()
			m.Servers = c.servers
			err := m.Validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	m := Default()
	m.ToolCalls.MaxCalls = 0
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "tool_calls.max_calls") {
		t.Fatalf("max_calls 0: %v", err)
	}
}

func TestServerPolicy(t *testing.T) {
	s := Server{Deny: []string{"delete_*"}, Ask: []string{"write_*", "delete_all"}}
	for tool, want := range map[string]string{"read_file": PolicyAllow, "write_file": PolicyAsk, "delete_x": PolicyDeny, "delete_all": PolicyDeny} {
		if got := s.Policy(tool); got != want {
			t.Errorf("%s: %s, want %s", tool, got, want)
		}
	}
	s = Server{Allow: []string{"read_*"}, Ask: []string{"read_secret"}}
	for tool, want := range map[string]string{"read_file": PolicyAllow, "read_secret": PolicyAsk, "write_file": PolicyDeny} {
		if got := s.Policy(tool); got != want {
			t.Errorf("allow list, %s: %s, want %s", tool, got, want)
		}
	}
}
