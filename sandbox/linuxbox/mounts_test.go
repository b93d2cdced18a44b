package linuxbox

import (
	"slices"
	"testing"
)

func TestMaskedPaths(t *testing.T) {
	p := MaskedPaths(2)
	for _, want := range []string{"/proc/interrupts", "/proc/kcore", "/sys/firmware", "/sys/devices/virtual/powercap",
		"/sys/devices/system/cpu/cpu0/thermal_throttle", "/sys/devices/system/cpu/cpu1/thermal_throttle"} {
		if !slices.Contains(p, want) {
			t.Errorf("%s not masked", want)
		}
	}
	if slices.Contains(p, "/sys/devices/system/cpu/cpu2/thermal_throttle") {
		t.Error("a CPU the host does not have")
	}
}

// TestReadonlyPathsIsACopy: a driver that changes its list changes no
// other box's.
func TestReadonlyPathsIsACopy(t *testing.T) {
	p := ReadonlyPaths()
	if !slices.Contains(p, "/proc/sys") || !slices.Contains(p, "/proc/sysrq-trigger") {
		t.Fatalf("read-only paths %v", p)
	}
	p[0] = "/changed"
	if ReadonlyPaths()[0] == "/changed" {
		t.Error("ReadonlyPaths hands out its own list")
	}
}

func TestTmpfsOptions(t *testing.T) {
	got := TmpfsOptions(1<<20, 64, "1000:1001", "1777")
	if want := "rw,nosuid,nodev,size=1048576,nr_inodes=64,uid=1000,gid=1001,mode=1777"; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
