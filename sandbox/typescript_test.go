package sandbox

import (
	"slices"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// A TypeScript job runs the runner that runbox-init writes, with Node's
// environment (heap, display library); type_check: false reaches the
// runner; a pooled box prestarts the runner, but only for its own command.
func TestTypeScriptJob(t *testing.T) {
	m := manifest.Default()
	lang, ok := m.Language("typescript")
	if !ok {
		t.Fatal("no typescript in the default manifest")
	}
	if manifest.TypeScriptRunner != initproto.TypeScriptRunner {
		t.Fatalf("the manifest's runner %s is not the one runbox-init writes, %s", manifest.TypeScriptRunner, initproto.TypeScriptRunner)
	}
	job := initJob(m, contract.Job{Language: lang, Code: "console.log(1)"}, manifest.IsolationRunc)
	if want := []string{"node", initproto.TypeScriptRunner, "/workspace/main.ts"}; !slices.Equal(job.Argv, want) {
		t.Errorf("argv %q, want %q", job.Argv, want)
	}
	env := strings.Join(job.Env, "\n")
	if !strings.Contains(env, "--max-old-space-size=") || !strings.Contains(env, "runbox_display.js") || strings.Contains(env, "RUNBOX_TS_TYPE_CHECK") {
		t.Errorf("env %q", job.Env)
	}
	off := false
	lang.TypeCheck = &off
	if job := initJob(m, contract.Job{Language: lang}, manifest.IsolationRunc); !slices.Contains(job.Env, "RUNBOX_TS_TYPE_CHECK=0") {
		t.Errorf("type_check false: env %q", job.Env)
	}
	lang.TypeCheck = nil

	args := prestartArgs(m, lang, manifest.IsolationRunc)
	if len(args) != 2 || args[0] != initproto.PrestartFlag {
		t.Fatalf("prestart args %q", args)
	}
	pre, err := initproto.DecodePrestart(args[1])
	if err != nil || !slices.Equal(pre.Argv, []string{"node", initproto.TypeScriptRunner, "--prestart"}) {
		t.Fatalf("prestart %+v, %v", pre, err)
	}
	other := lang
	other.Command = []string{"node", "/usr/local/bin/my-ts-runner.js", "{file}"}
	if args := prestartArgs(m, other, manifest.IsolationRunc); args != nil {
		t.Errorf("another command was prestarted as the runner: %q", args)
	}
	js, _ := m.Language("javascript")
	if args := prestartArgs(m, js, manifest.IsolationRunc); args != nil {
		t.Errorf("javascript prestarted: %q", args)
	}
}
