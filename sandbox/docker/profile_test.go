package docker

import (
	"slices"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/sandbox"

	"github.com/runbox-mcp/runbox/manifest"
)

// TestBoxSpecHasEveryProfileItem asserts the isolation profile of the
// contract, item by item, on the container spec.
func TestBoxSpecHasEveryProfileItem(t *testing.T) {
	m := manifest.Default()
	lang, _ := m.Language("python")
	cfg, host := boxSpec(m, lang, map[string]string{sandbox.LabelManaged: "true"}, "runbox-init-x", nil)
	lim := m.Limits
	check := func(item string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("profile item missing: %s", item)
		}
	}
	check("no network", host.NetworkMode == "none" && cfg.NetworkDisabled)
	check("all capabilities dropped", slices.Equal(host.CapDrop, []string{"ALL"}) && len(host.CapAdd) == 0)
	check("no-new-privileges", slices.Contains(host.SecurityOpt, "no-new-privileges"))
	check("read-only root", host.ReadonlyRootfs)
	check("not privileged", !host.Privileged)
	check("workspace tmpfs capped", strings.Contains(host.Tmpfs["/workspace"], "size=67108864") && strings.Contains(host.Tmpfs["/workspace"], "nr_inodes=16384"))
	check("tmp tmpfs capped", strings.Contains(host.Tmpfs["/tmp"], "size=67108864") && strings.Contains(host.Tmpfs["/tmp"], "nr_inodes="))
	check("tmpfs nosuid,nodev", strings.Contains(host.Tmpfs["/tmp"], "nosuid,nodev"))
	check("no /dev/shm", host.IpcMode == "none")
	check("non-root user", cfg.User == "1000:1000")
	check("empty environment", len(cfg.Env) == 0)
	check("memory = memory+swap", host.Memory == int64(lim.Memory) && host.MemorySwap == host.Memory)
	check("cpu quota", host.NanoCPUs == 1e9)
	check("pids limit", host.PidsLimit != nil && *host.PidsLimit == 128)
	var nofile, fsize, core bool
	for _, u := range host.Ulimits {
		nofile = nofile || (u.Name == "nofile" && u.Hard == lim.OpenFiles)
		fsize = fsize || (u.Name == "fsize" && u.Hard == int64(lim.WorkspaceBytes))
		core = core || (u.Name == "core" && u.Hard == 0 && u.Soft == 0)
	}
	check("ulimits nofile, fsize, core=0", nofile && fsize && core)
	check("our seccomp profile, inline", slices.ContainsFunc(host.SecurityOpt, func(s string) bool {
		return strings.HasPrefix(s, "seccomp={") && strings.Contains(s, `"SCMP_ACT_KILL_PROCESS"`)
	}) && !slices.ContainsFunc(host.SecurityOpt, func(s string) bool { return strings.Contains(s, "unconfined") }))
	check("masked paths explicit", slices.Contains(host.MaskedPaths, "/proc/interrupts") && slices.Contains(host.MaskedPaths, "/proc/kcore"))
	check("read-only kernel paths", slices.Contains(host.ReadonlyPaths, "/proc/sys"))
	check("our PID 1, not docker-init", host.Init != nil && !*host.Init && cfg.Entrypoint[0] == sandbox.InitPath)
	check("only our read-only init volume mounted", len(host.Mounts) == 1 && host.Mounts[0].ReadOnly && host.Mounts[0].Type == "volume" && len(host.Binds) == 0)
	check("labelled", cfg.Labels[sandbox.LabelManaged] == "true")
	check("no logs kept", host.LogConfig.Type == "none")
	check("runc", host.Runtime == "runc")

	m.Isolation = manifest.IsolationGVisor
	_, host = boxSpec(m, lang, nil, "v", nil)
	check("gvisor runs runsc without a pids cgroup limit", host.Runtime == "runsc" && host.PidsLimit == nil)
}
