//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckpointTimings measures, on gVisor, checkpoint, restore and
// fork of a Python session holding 10 MB and 200 MB of state, against
// session_open plus running the same cells again. Run only with
// RUNBOX_CHECKPOINT_TIMINGS=1: it reports, it asserts no speed.
func TestCheckpointTimings(t *testing.T) {
	if os.Getenv("RUNBOX_CHECKPOINT_TIMINGS") == "" {
		t.Skip("set RUNBOX_CHECKPOINT_TIMINGS=1 to measure")
	}
	s := gvisorOCIServer(t, t.TempDir(), "checkpoints:\n  max_per_client: 64\n  max_total: 64\n  max_bytes: 16GiB\n  max_client_bytes: 16GiB\nsessions:\n  max_per_client: 16\n  max_open: 16\n  memory: 1GiB\n")
	p50 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	seen := 0
	for _, mb := range []int{10, 200} {
		cell := fmt.Sprintf("import os, numpy as np\nstate = np.frombuffer(os.urandom(%d << 20), dtype=np.uint8).copy()\nprint(int(state[:8].sum()))", mb)
		var ck, rs, fk, rebuild []time.Duration
		for range 3 {
			start := time.Now()
			id := s.open(t, "python")
			s.out(t, id, "python", cell)
			rebuild = append(rebuild, time.Since(start))
			start = time.Now()
			c := s.checkpoint(t, id)
			ck = append(ck, time.Since(start))
			start = time.Now()
			r := s.restored(t, "session_restore", "checkpoint_id", c, "memory")
			rs = append(rs, time.Since(start))
			start = time.Now()
			f := s.restored(t, "session_fork", "session_id", id, "memory")
			fk = append(fk, time.Since(start))
			for _, sid := range []string{id, r, f} {
				s.out(t, sid, "python", "print(state.size)")
				s.tool(t, "session_close", map[string]any{"session_id": sid})
			}
		}
		// With RUNBOX_LOG_LEVEL=debug the server logs where each fork's
		// time went: runsc checkpoint, a box's set-up, the fork ready.
		logs := s.stderr.String()
		for _, l := range strings.Split(logs[seen:], "\n") {
			if strings.Contains(l, "fork timings") || strings.Contains(l, "runsc ") {
				t.Log(l)
			}
		}
		seen = len(logs)
		t.Logf("gVisor, %d MB of state, p50 of 3: checkpoint %v, restore %v, fork %v; session_open + the cell again %v",
			mb, p50(ck).Round(time.Millisecond), p50(rs).Round(time.Millisecond), p50(fk).Round(time.Millisecond), p50(rebuild).Round(time.Millisecond))
	}
}
