//go:build e2e

package e2e

import (
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// TestNodeHeapFitsTheBox: V8 sizes its heap from the box, not the host's
// default of about half the box, so a program may use the memory it was
// given (320 MB held in a 512 MiB box died of the heap limit before); one
// that exhausts the heap is oom with the memory limit, not a SIGABRT.
func TestNodeHeapFitsTheBox(t *testing.T) {
	s := shared(t)
	t.Run("320 MB held in a 512 MiB box", func(t *testing.T) {
		r, _ := s.call(t, map[string]any{"language": "javascript", "timeout_seconds": 60,
			"code": "const a = [];\nfor (let i = 0; i < 320; i++) a.push(new Array(131072).fill(i + 0.5));\nconsole.log('held', a.length);\n"})
		mustOK(t, r)
		if r.Stdout != "held 320\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("heap exhaustion is oom", func(t *testing.T) {
		r, _ := s.call(t, map[string]any{"language": "javascript", "timeout_seconds": 60,
			"code": "const a = [];\nfor (;;) a.push(new Array(131072).fill(Math.random()));\n"})
		wantError(t, r, contract.KindOOM, contract.LimitMemory)
	})
}
