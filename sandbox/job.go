package sandbox

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// baseEnv is the whole environment of the program, before the language's
// additions: nothing of the host's.
var baseEnv = map[string]string{
	// Last, the scripts of packages pip installed into the user's site
	// (HOME is /tmp): they can add commands, never shadow the image's.
	"PATH":   "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/tmp/.local/bin",
	"HOME":   manifest.Tmp,
	"TMPDIR": manifest.Tmp,
	"LANG":   "C.UTF-8",
}

// initJob is what runbox-init receives for a job, in a box of the given
// isolation level.
func initJob(m *manifest.Manifest, job contract.Job, isolation string) *initproto.Job {
	ij := cellJob(m, job, isolation)
	ij.Env = esmHook(m, job.Language, job.Code, programEnv(m, job.Language))
	if len(job.Language.Check) > 0 {
		ij.Check = expandFile(job.Language.Check, ij.CodePath)
	}
	return ij
}

// cellJob is initJob for a session's cell, which its session's
// interpreter runs: no program starts, so it carries neither the
// program's environment nor its syntax check (the interpreter was
// started with the environment, and its driver checks the cell).
func cellJob(m *manifest.Manifest, job contract.Job, isolation string) *initproto.Job {
	lang := job.Language
	codePath := manifest.Workspace + "/" + lang.File
	files := make([]initproto.File, len(job.Files))
	for i, f := range job.Files {
		files[i] = initproto.File{Path: f.Path, Data: f.Data}
	}
	ij := &initproto.Job{
		Argv:             expandFile(lang.Command, codePath),
		Dir:              manifest.Workspace,
		CodePath:         codePath,
		Code:             []byte(job.Code),
		Stdin:            []byte(job.Stdin),
		Files:            files,
		TimeoutMs:        job.Timeout.Milliseconds(),
		CPUSeconds:       m.Limits.CPUSeconds,
		MaxOutputBytes:   int(m.Limits.OutputBytes),
		MaxArtifacts:     m.Limits.Artifacts,
		MaxArtifactBytes: int64(m.Limits.ArtifactBytes),
	}
	if m.Network.Enabled() {
		ij.Proxy = initproto.ProxyAddr
	}
	if isolation == manifest.IsolationGVisor {
		// runsc refuses a pids cgroup: gVisor's own kernel counts the
		// box's processes under RLIMIT_NPROC instead.
		ij.NProc = m.Limits.Pids
	}
	return ij
}

// expandFile is argv with {file} replaced by codePath.
func expandFile(argv []string, codePath string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, "{file}", codePath)
	}
	return out
}

// programEnv is the program's whole environment, sorted.
func programEnv(m *manifest.Manifest, lang manifest.Language) []string {
	env := maps.Clone(baseEnv)
	// Math libraries start a thread per core they see, and a box sees the
	// host's: on a large host that alone would hit the pids limit.
	threads := strconv.Itoa(int(math.Ceil(m.Limits.CPUs)))
	env["OPENBLAS_NUM_THREADS"], env["OMP_NUM_THREADS"] = threads, threads
	if lang.IsNode() {
		// V8 sizes its heap from the host's memory, not the box's: about
		// half of a 512 MiB box. Sized to the box with headroom, a program
		// can use the memory it was given, and one that needs more meets
		// the heap limit (reported as oom) before the kernel's killer.
		env["NODE_OPTIONS"] = "--max-old-space-size=" + strconv.FormatInt(nodeHeapMiB(int64(m.Limits.Memory)), 10)
	}
	if lang.ErrorFormat == "typescript" && !lang.TypeChecked() {
		// The TypeScript runner transpiles without checking (and takes
		// the variable out of the program's environment).
		env["RUNBOX_TS_TYPE_CHECK"] = "0"
	}
	if len(m.Servers) > 0 {
		// runbox-init writes the runbox_tools libraries there.
		env["PYTHONPATH"], env["NODE_PATH"] = initproto.ToolsLib, initproto.ToolsLib
	}
	displayEnv(lang, env)
	networkEnv(m, env)
	for k, v := range lang.Env {
		if k == "NODE_OPTIONS" && env[k] != "" {
			v = env[k] + " " + v
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// nodeHeapMiB is V8's old-space size for a box of memory bytes: three
// quarters of it, or all but 128 MiB on a large box, never under 32 MiB.
func nodeHeapMiB(memory int64) int64 {
	mib := memory >> 20
	return max(32, mib*3/4, mib-128)
}
