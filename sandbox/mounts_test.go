package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// A run with mounts of its own (a client's roots) starts a box with them,
// never a pooled box, which has only the manifest's folders.
func TestRunWithMountsSkipsThePool(t *testing.T) {
	d := &fakeDriver{behave: reply(initproto.Report{})}
	m := testManifest(t, func(m *manifest.Manifest) {
		m.Pool.Size = 1
		m.Pool.IdleSeconds = 60
		m.Languages = m.Languages[:1]
	})
	r := newTestRunner(t, d, m)
	if err := r.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return r.Stats().PoolIdle["python"] == 1 })
	mounts := []HostMount{{Source: "/home/me/p", Target: "/mnt/roots/p", URI: "file:///home/me/p"}}
	res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, time.Second), Mounts: mounts})
	if res.Status != contract.StatusOK || res.Metrics.Pooled {
		t.Fatalf("result %+v pooled %v", res.Error, res.Metrics.Pooled)
	}
	d.mu.Lock()
	last := d.boxes[len(d.boxes)-1].spec
	d.mu.Unlock()
	if len(last.Mounts) != 1 || last.Mounts[0] != mounts[0] {
		t.Fatalf("box mounts %+v", last.Mounts)
	}
	if r.Stats().PoolIdle["python"] != 1 {
		t.Error("the pooled box was used")
	}
	if got := Roots(mounts); len(got) != 1 || got[0].Path != "/mnt/roots/p" || got[0].URI != "file:///home/me/p" {
		t.Errorf("roots %+v", got)
	}
}
