package sandbox

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// baseEnv is the whole environment of the program, before the language's
// additions: nothing of the host's.
var baseEnv = map[string]string{
	"PATH":   "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME":   manifest.Tmp,
	"TMPDIR": manifest.Tmp,
	"LANG":   "C.UTF-8",
}

// RuntimeFor maps an isolation level to the engine's OCI runtime name.
func RuntimeFor(isolation string) string {
	if isolation == manifest.IsolationGVisor {
		return "runsc"
	}
	return "runc"
}

// boxSpec is the isolation profile of one box: every item of the contract,
// on every run, with no switch to weaken it.
func boxSpec(m *manifest.Manifest, lang manifest.Language, labels map[string]string, initVolume string, initArgs []string) (*container.Config, *container.HostConfig) {
	lim := m.Limits
	falseV := false
	pids := lim.Pids
	cfg := &container.Config{
		Image:      lang.Image,
		User:       m.User,
		Hostname:   "sandbox",
		WorkingDir: manifest.Workspace,
		Entrypoint: []string{InitPath},
		Cmd:        append([]string{}, initArgs...),
		// The image's environment is not the program's: runbox-init
		// gives the program exactly the job's.
		Env:             []string{},
		Labels:          labels,
		NetworkDisabled: true,
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		OpenStdin:       true,
		StdinOnce:       true,
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", seccompOpts[m.Isolation]},
		MaskedPaths:    maskedPaths(runtime.NumCPU()),
		ReadonlyPaths:  readonlyPaths,
		ReadonlyRootfs: true,
		// No /dev/shm: /workspace and /tmp are the only writable places.
		IpcMode: container.IPCModeNone,
		Tmpfs: map[string]string{
			manifest.Workspace: tmpfsOpts(int64(lim.WorkspaceBytes), lim.WorkspaceFiles, m.User, "0755"),
			manifest.Tmp:       tmpfsOpts(int64(lim.TmpBytes), lim.WorkspaceFiles, m.User, "1777"),
		},
		// Our own PID 1 (runbox-init), never the engine's docker-init,
		// which is a host file shared by every box.
		Init: &falseV,
		// Output goes over the attach stream only; nothing is logged.
		LogConfig: container.LogConfig{Type: "none"},
		Runtime:   RuntimeFor(m.Isolation),
		Mounts: []mount.Mount{{
			Type:          mount.TypeVolume,
			Source:        initVolume,
			Target:        InitDir,
			ReadOnly:      true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		}},
		Resources: container.Resources{
			Memory:     int64(lim.Memory),
			MemorySwap: int64(lim.Memory), // no swap
			NanoCPUs:   int64(lim.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: lim.OpenFiles, Hard: lim.OpenFiles},
				{Name: "fsize", Soft: int64(lim.WorkspaceBytes), Hard: int64(lim.WorkspaceBytes)},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	if m.Isolation == manifest.IsolationGVisor {
		// runsc on this engine refuses a pids limit (the sandbox dies on
		// fork): runbox-init enforces RLIMIT_NPROC instead.
		host.PidsLimit = nil
	}
	return cfg, host
}

// tmpfsOpts caps size and inodes: without nr_inodes, empty files exhaust
// memory long before the size cap bites.
func tmpfsOpts(size, inodes int64, user, mode string) string {
	uid, gid, _ := strings.Cut(user, ":")
	return fmt.Sprintf("rw,nosuid,nodev,size=%d,nr_inodes=%d,uid=%s,gid=%s,mode=%s", size, inodes, uid, gid, mode)
}

// initJob is what runbox-init receives for a job.
func initJob(m *manifest.Manifest, job contract.Job) *initproto.Job {
	lang := job.Language
	codePath := manifest.Workspace + "/" + lang.File
	expand := func(argv []string) []string {
		out := make([]string, len(argv))
		for i, a := range argv {
			out[i] = strings.ReplaceAll(a, "{file}", codePath)
		}
		return out
	}
	env := maps.Clone(baseEnv)
	// Math libraries start a thread per core they see, and a box sees the
	// host's: on a large host that alone would hit the pids limit.
	threads := strconv.Itoa(int(math.Ceil(m.Limits.CPUs)))
	env["OPENBLAS_NUM_THREADS"], env["OMP_NUM_THREADS"] = threads, threads
	maps.Copy(env, lang.Env)
	envList := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, k+"="+env[k])
	}
	files := make([]initproto.File, len(job.Files))
	for i, f := range job.Files {
		files[i] = initproto.File{Path: f.Path, Data: f.Data}
	}
	ij := &initproto.Job{
		Argv:             expand(lang.Command),
		Dir:              manifest.Workspace,
		CodePath:         codePath,
		Code:             []byte(job.Code),
		Stdin:            []byte(job.Stdin),
		Files:            files,
		Env:              envList,
		TimeoutMs:        job.Timeout.Milliseconds(),
		CPUSeconds:       m.Limits.CPUSeconds,
		MaxOutputBytes:   int(m.Limits.OutputBytes),
		MaxArtifacts:     m.Limits.Artifacts,
		MaxArtifactBytes: int64(m.Limits.ArtifactBytes),
	}
	if len(lang.Check) > 0 {
		ij.Check = expand(lang.Check)
	}
	if m.Isolation == manifest.IsolationGVisor {
		ij.NProc = m.Limits.Pids
	}
	return ij
}

// uid is the numeric user the boxes run as (the manifest's "uid:gid").
func (d *Docker) uid() int {
	u, _, _ := strings.Cut(d.m.User, ":")
	n, err := strconv.Atoi(u)
	if err != nil {
		return -1
	}
	return n
}
