package docker

import (
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// TestCanReweigh: pooled boxes start at a low CPU weight only where the
// engine can raise it when a call takes the box (runc on Docker).
func TestCanReweigh(t *testing.T) {
	for _, c := range []struct {
		isolation string
		podman    bool
		want      bool
	}{
		{manifest.IsolationRunc, false, true},
		{manifest.IsolationGVisor, false, false}, // runsc has no update
		{manifest.IsolationRunc, true, false},
	} {
		m := manifest.Default()
		m.Isolation = c.isolation
		d := &Docker{m: m}
		d.podman.Store(c.podman)
		if got := d.canReweigh(); got != c.want {
			t.Errorf("%s, podman %v: canReweigh %v, want %v", c.isolation, c.podman, got, c.want)
		}
	}
	if pooledCPUShares < 2 || pooledCPUShares >= claimedCPUShares {
		t.Errorf("pooled weight %d, claimed %d", pooledCPUShares, claimedCPUShares)
	}
}
