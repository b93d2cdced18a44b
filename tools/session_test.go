package tools

import (
	"context"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestValidateOpen(t *testing.T) {
	m := manifest.Default()
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		args SessionOpenArgs
		ok   bool
	}{
		{"plain", SessionOpenArgs{Language: "python"}, true},
		{"unknown language", SessionOpenArgs{Language: "cobol"}, false},
		{"shorter ttl", SessionOpenArgs{Language: "bash", IdleTTLSeconds: f(5)}, true},
		{"ttl past the server's", SessionOpenArgs{Language: "bash", IdleTTLSeconds: f(1e6)}, false},
		{"less memory", SessionOpenArgs{Language: "python", MemoryMiB: i(128)}, true},
		{"more memory than allowed", SessionOpenArgs{Language: "python", MemoryMiB: i(1 << 20)}, false},
		{"too few pids", SessionOpenArgs{Language: "python", Pids: i(1)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, bad := validateOpen(m, c.args)
			if (bad == nil) != c.ok {
				t.Fatalf("%+v", bad)
			}
			if bad != nil && bad.Kind != contract.KindInvalidRequest {
				t.Fatalf("kind %s", bad.Kind)
			}
			if c.args.MemoryMiB != nil && bad == nil && int64(req.Limits.Memory) != *c.args.MemoryMiB<<20 {
				t.Fatalf("memory %d", req.Limits.Memory)
			}
		})
	}
}

func TestPrincipal(t *testing.T) {
	if p := PrincipalOf(context.Background()); p != LocalPrincipal {
		t.Fatal(p)
	}
	if p := PrincipalOf(WithPrincipal(context.Background(), "alice")); p != "alice" {
		t.Fatal(p)
	}
}
