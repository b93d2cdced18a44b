package linuxbox

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaskedPaths are the kernel interfaces a box does not see, on a host of
// ncpu CPUs: moby's current list, set explicitly, since older engines
// (20.10 here) leave /proc/interrupts and the thermal and powercap
// interfaces readable, and they leak what other tenants do on the host.
func MaskedPaths(ncpu int) []string {
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

// ReadonlyPaths are the kernel interfaces a box sees but cannot write.
func ReadonlyPaths() []string { return slices.Clone(readonlyPaths) }

// TmpfsOptions are the mount options of a box's writable tmpfs, owned by
// the manifest's user ("uid:gid"), with size and inodes capped: without
// nr_inodes, empty files exhaust memory long before the size cap bites.
func TmpfsOptions(size, inodes int64, user, mode string) string {
	uid, gid, _ := strings.Cut(user, ":")
	return fmt.Sprintf("rw,nosuid,nodev,size=%d,nr_inodes=%d,uid=%s,gid=%s,mode=%s", size, inodes, uid, gid, mode)
}
