//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/sandbox"
)

func pooledBoxes(pid int) []string {
	return boxes("label="+sandbox.LabelPooled+"=true", "label="+sandbox.LabelOwnerPID+"="+strconv.Itoa(pid))
}

func waitPooled(t *testing.T, pid, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(pooledBoxes(pid)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d pooled boxes, want %d", len(pooledBoxes(pid)), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWarmPool: pooled boxes answer exactly as cold ones, each serves one
// job, the pool refills, and shutdown leaves nothing behind.
func TestWarmPool(t *testing.T) {
	p := writeManifest(t, "pool:\n  size: 2\n")
	s := startServer(t, nil, "--manifest", p)
	pid := s.cmd.Process.Pid
	waitPooled(t, pid, 6) // 2 per language
	cold := shared(t)
	cases := []map[string]any{
		{"language": "python", "code": "import sys; print(sys.stdin.read()[::-1])", "stdin": "loop"},
		{"language": "javascript", "code": "const a = ;"},
		{"language": "bash", "code": "echo $((6*7)); no_such_cmd"},
		{"language": "python", "code": "open('a.txt','w').write('x')"},
		{"language": "bash", "code": "while :; do :; done", "timeout_seconds": 1},
	}
	for i, args := range cases {
		warm, _ := s.call(t, args)
		ref, _ := cold.call(t, args)
		if !warm.Metrics.Pooled || ref.Metrics.Pooled {
			t.Fatalf("case %d: pooled %v / %v", i, warm.Metrics.Pooled, ref.Metrics.Pooled)
		}
		if warm.Status != ref.Status || warm.Stdout != ref.Stdout || (warm.Error == nil) != (ref.Error == nil) ||
			(warm.Error != nil && (warm.Error.Kind != ref.Error.Kind || warm.Error.Line != ref.Error.Line || warm.Error.Message != ref.Error.Message)) ||
			len(warm.Artifacts) != len(ref.Artifacts) {
			t.Fatalf("case %d: a pooled run differs from a cold one:\nwarm %+v %+v\ncold %+v %+v", i, warm, warm.Error, ref, ref.Error)
		}
		waitPooled(t, pid, 6)
	}
	// One job per box: the pool's boxes were all replaced.
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "find /workspace /tmp -mindepth 1"})
	if r.Stdout != "/workspace/main.sh\n" || !r.Metrics.Pooled {
		t.Fatalf("a pooled box had state: %q", r.Stdout)
	}
	s.close()
	if left := waitNoBoxes(10*time.Second, "label="+sandbox.LabelOwnerPID+"="+strconv.Itoa(pid)); len(left) > 0 {
		t.Fatalf("shutdown left %d pooled boxes", len(left))
	}

	// After a crash, the next server reaps the pool.
	s = startServer(t, nil, "--manifest", p)
	pid = s.cmd.Process.Pid
	waitPooled(t, pid, 6)
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = s.cmd.Process.Wait()
	_ = s.c.Close()
	s2 := startServer(t, nil)
	defer s2.close()
	if left := waitNoBoxes(15*time.Second, "label="+sandbox.LabelOwnerPID+"="+strconv.Itoa(pid)); len(left) > 0 {
		t.Fatalf("the pool of a killed server survived its restart: %v", left)
	}
}

// TestResultCache: an exact repeat is answered without a box (and its
// artifacts are readable under the new run), a timeout never is.
func TestResultCache(t *testing.T) {
	p := writeManifest(t, "cache:\n  enabled: true\n")
	s := startServer(t, nil, "--manifest", p)
	defer s.close()
	args := map[string]any{"language": "python", "code": "import random\nprint(random.random())\nopen('r.txt','w').write('x')"}
	first, _ := s.call(t, args)
	second, _ := s.call(t, args)
	mustOK(t, second)
	if first.Metrics.Cached || !second.Metrics.Cached || second.Stdout != first.Stdout || second.RunID == first.RunID {
		t.Fatalf("repeat: first %+v\nsecond %+v", first.Metrics, second.Metrics)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = second.Artifacts[0].URI
	if res, err := s.c.ReadResource(context.Background(), req); err != nil || res.Contents[0].(mcp.TextResourceContents).Text != "x" {
		t.Fatalf("cached run's artifact: %v", err)
	}
	args["stdin"] = "different"
	if third, _ := s.call(t, args); third.Metrics.Cached {
		t.Fatal("a different stdin was answered from the cache")
	}
	slow := map[string]any{"language": "bash", "code": "sleep 5", "timeout_seconds": 0.5}
	s.call(t, slow)
	if again, _ := s.call(t, slow); again.Metrics.Cached || again.Error == nil || again.Error.Kind != sandbox.KindTimeout {
		t.Fatalf("a timeout was cached: %+v", again.Metrics)
	}
}
