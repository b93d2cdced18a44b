package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// countingRunner is a fake runner for the cache's pure logic.
type countingRunner struct {
	calls  int
	result func(contract.Job) contract.Result
}

func (r *countingRunner) Run(_ context.Context, req RunRequest) contract.Result {
	job := req.Job
	r.calls++
	res := r.result(job)
	res.RunID = job.RunID
	return res
}

func (r *countingRunner) Sessions() SessionRunner                   { return nil }
func (r *countingRunner) Peek(context.Context, string) (Peek, bool) { return Peek{}, false }
func (r *countingRunner) Close() error                              { return nil }

func TestCache(t *testing.T) {
	m := manifest.Default()
	m.Cache = manifest.Cache{Enabled: true, TTLSeconds: 60, MaxBytes: 1000}
	py, _ := m.Language("python")
	inner := &countingRunner{result: func(j contract.Job) contract.Result {
		res := contract.Result{Status: contract.StatusOK, Stdout: "out:" + j.Code, Artifacts: []contract.Artifact{{Path: "a.txt", Data: []byte("x")}}}
		switch j.Code {
		case "timeout":
			res.Status, res.Error = contract.StatusError, &contract.ErrorInfo{Kind: contract.KindTimeout}
		case "runtime":
			res.Status, res.Error = contract.StatusError, &contract.ErrorInfo{Kind: contract.KindRuntime, Line: 1}
		}
		return res
	}}
	digest := "sha256:one"
	c := NewCache(inner, m, func(context.Context, string) (string, error) { return digest, nil })
	now := time.Unix(0, 0)
	c.now = func() time.Time { return now }
	job := func(id, code string) contract.Job {
		return contract.Job{RunID: id, Language: py, Code: code, Timeout: time.Second, Files: []contract.File{{Path: "b", Data: []byte("1")}, {Path: "a", Data: []byte("2")}}}
	}
	run := func(id, code string) contract.Result {
		return c.Run(context.Background(), RunRequest{Job: job(id, code)})
	}

	first := run("r1", "print(1)")
	second := run("r2", "print(1)")
	if inner.calls != 1 || !second.Metrics.Cached || first.Metrics.Cached || second.RunID != "r2" || second.Stdout != first.Stdout {
		t.Fatalf("repeat not answered from the cache: calls %d, %+v", inner.calls, second)
	}
	if second.Artifacts[0].URI != contract.ArtifactURI("r2", "a.txt") || first.Artifacts[0].URI != "" {
		t.Fatalf("artifact URIs must name the new run: %+v / %+v", second.Artifacts, first.Artifacts)
	}
	reordered := job("r3", "print(1)")
	reordered.Files[0], reordered.Files[1] = reordered.Files[1], reordered.Files[0]
	if c.Run(context.Background(), RunRequest{Job: reordered}); inner.calls != 1 {
		t.Fatal("the order of input files changed the key")
	}
	if res := c.Run(context.Background(), RunRequest{Job: job("r5", "print(1)"), Mounts: []HostMount{{Source: "/p", Target: "/mnt/roots/p"}}}); inner.calls != 2 || res.Metrics.Cached {
		t.Fatal("a run with a client's folders was answered from the cache")
	}
	for _, change := range []func(*contract.Job){
		func(j *contract.Job) { j.Stdin = "x" },
		func(j *contract.Job) { j.Timeout = 2 * time.Second },
		func(j *contract.Job) { j.Files[0].Data = []byte("other") },
	} {
		j := job("r", "print(1)")
		change(&j)
		before := inner.calls
		c.Run(context.Background(), RunRequest{Job: j})
		if inner.calls != before+1 {
			t.Fatalf("a different job was answered from the cache: %+v", j)
		}
	}
	digest = "sha256:two"
	if run("r4", "print(1)"); inner.calls != 6 {
		t.Fatal("a rebuilt image answered from the old one's cache")
	}
	for _, code := range []string{"timeout", "timeout"} {
		run("r", code)
	}
	if inner.calls != 8 {
		t.Fatal("a timeout was cached")
	}
	run("r", "runtime")
	if r := run("r", "runtime"); !r.Metrics.Cached {
		t.Fatal("a runtime error (the program's own outcome) was not cached")
	}
	now = now.Add(2 * time.Minute)
	if r := run("r", "print(1)"); r.Metrics.Cached {
		t.Fatal("served past the TTL")
	}
	big := strings.Repeat("x", 2000)
	run("r", big)
	if r := run("r", big); r.Metrics.Cached {
		t.Fatal("a result over max_bytes was kept")
	}
}

func (*countingRunner) Adopt(_ context.Context, d Detached) contract.Result {
	return contract.Fail(d.Job, contract.RunLost("a test runner adopts nothing"))
}

func (*countingRunner) MarkKept(string) {}
