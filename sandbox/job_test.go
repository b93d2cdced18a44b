package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestGVisorJob(t *testing.T) {
	m := manifest.Default()
	lang, _ := m.Language("python")
	job := initJob(m, contract.Job{Language: lang, Timeout: time.Second}, manifest.IsolationGVisor)
	if job.NProc != m.Limits.Pids {
		t.Errorf("gvisor must limit processes with RLIMIT_NPROC: %d", job.NProc)
	}
	// Under gVisor the interpreter is prestarted but preloads nothing (it
	// did not pay there: prestart.go); under runc it preloads.
	for iso, want := range map[string]string{manifest.IsolationGVisor: "[]", manifest.IsolationRunc: `["numpy","pandas"]`} {
		args := prestartArgs(m, lang, iso)
		if len(args) != 2 {
			t.Fatalf("%s: no prestarted python", iso)
		}
		pre, err := initproto.DecodePrestart(args[1])
		if err != nil {
			t.Fatal(err)
		}
		if src := pre.Argv[len(pre.Argv)-1]; !strings.Contains(src, "_thread.start_new_thread(_preload, ("+want+",))") {
			t.Errorf("%s: the loader does not preload %s", iso, want)
		}
	}
}

func TestNodeHeapFitsTheBox(t *testing.T) {
	m := manifest.Default()
	node, _ := m.Language("javascript")
	env := strings.Join(initJob(m, contract.Job{Language: node}, manifest.IsolationRunc).Env, " ")
	want := "NODE_OPTIONS=--max-old-space-size=384" // a 512 MiB box
	if m.Limits.Memory == 512<<20 && !strings.Contains(env, want) {
		t.Errorf("env %s, want %s", env, want)
	}
	for _, c := range []struct{ mem, want int64 }{{256 << 20, 192}, {512 << 20, 384}, {2 << 30, 1920}, {16 << 20, 32}} {
		if got := nodeHeapMiB(c.mem); got != c.want {
			t.Errorf("nodeHeapMiB(%d MiB) = %d, want %d", c.mem>>20, got, c.want)
		}
	}
}

func TestInitJob(t *testing.T) {
	m := manifest.Default()
	sh, _ := m.Language("bash")
	j := initJob(m, contract.Job{Language: sh, Code: "echo", Stdin: "in", Timeout: 1500 * time.Millisecond, Files: []contract.File{{Path: "a", Data: []byte("x")}}}, manifest.IsolationRunc)
	if strings.Join(j.Argv, " ") != "bash /workspace/main.sh" || strings.Join(j.Check, " ") != "bash -n /workspace/main.sh" {
		t.Errorf("argv %v check %v", j.Argv, j.Check)
	}
	if j.TimeoutMs != 1500 || j.CodePath != "/workspace/main.sh" || j.Dir != "/workspace" || string(j.Stdin) != "in" || j.NProc != 0 {
		t.Errorf("job %+v", j)
	}
	if strings.Join(j.Env, " ") != "HOME=/tmp LANG=C.UTF-8 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/tmp/.local/bin TMPDIR=/tmp" {
		t.Errorf("env %v", j.Env)
	}
}
