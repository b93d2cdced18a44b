package docker

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/runbox-mcp/runbox/manifest"
)

// The seccomp profiles are rendered by internal/seccompgen from moby's
// current default (see there for what differs) and committed here; the
// engine receives them inline, so its own default never applies.
//
//go:embed seccomp/*.json
var seccompFiles embed.FS

// seccompOpts are the SecurityOpt entries that carry the profile for the
// server's architecture (the engine's, for a local engine) at each
// isolation level.
var seccompOpts = map[string]string{
	// Names as internal/seccompgen.FileName writes them (that package
	// pulls moby's generator in, which the server does not need).
	manifest.IsolationRunc:   mustSeccompOpt(runtime.GOARCH + ".json"),
	manifest.IsolationGVisor: mustSeccompOpt(runtime.GOARCH + "-gvisor.json"),
}

func mustSeccompOpt(name string) string {
	b, err := seccompFiles.ReadFile("seccomp/" + name)
	if err != nil {
		// Built for an architecture without a profile: fail at start,
		// never run a box without one.
		panic(fmt.Sprintf("runbox has no seccomp profile %s", name))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		panic(fmt.Sprintf("seccomp/%s: %v", name, err))
	}
	return "seccomp=" + compact.String()
}

// maskedPaths is moby's current list, set explicitly: older engines (20.10
// here) leave /proc/interrupts and the thermal and powercap interfaces
// readable, and they leak what other tenants do on the host.
func maskedPaths(ncpu int) []string {
	paths := []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/interrupts",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	for i := range ncpu {
		paths = append(paths, "/sys/devices/system/cpu/cpu"+strconv.Itoa(i)+"/thermal_throttle")
	}
	return paths
}

// readonlyPaths is moby's list of kernel interfaces visible but not writable.
var readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// SeccompProfile is the seccomp profile of an isolation level, as JSON in
// the engine's format: what a driver that is not an engine (sandbox/runc)
// turns into its OCI form.
func SeccompProfile(isolation string) string {
	return strings.TrimPrefix(seccompOpts[isolation], "seccomp=")
}

// MaskedPaths and ReadonlyPaths are the kernel interfaces a box does not
// see, and sees read-only, for a host of ncpu CPUs.
func MaskedPaths(ncpu int) []string { return maskedPaths(ncpu) }

func ReadonlyPaths() []string { return slices.Clone(readonlyPaths) }

// TmpfsOptions are the mount options of a box's writable tmpfs: size and
// inodes capped, owned by the manifest's user ("uid:gid").
func TmpfsOptions(size, inodes int64, user, mode string) string {
	return tmpfsOpts(size, inodes, user, mode)
}
