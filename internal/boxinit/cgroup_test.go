//go:build linux

package boxinit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCPULimit reads a box's CPU quota from cgroup v2's cpu.max and from
// v1's quota and period; no quota, or none readable, is 0.
func TestCPULimit(t *testing.T) {
	write := func(t *testing.T, dir, rel, text string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range map[string]struct {
		files map[string]string
		want  float64
	}{
		"v2, one CPU":      {map[string]string{"cpu.max": "100000 100000\n"}, 1},
		"v2, half a CPU":   {map[string]string{"cpu.max": "50000 100000\n"}, 0.5},
		"v2, four CPUs":    {map[string]string{"cpu.max": "400000 100000\n"}, 4},
		"v2, no quota":     {map[string]string{"cpu.max": "max 100000\n"}, 0},
		"v1, two CPUs":     {map[string]string{"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2},
		"v1, no quota":     {map[string]string{"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0},
		"no cgroup files":  {nil, 0},
		"v2, not a number": {map[string]string{"cpu.max": "lots 100000\n"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for rel, text := range tc.files {
				write(t, dir, rel, text)
			}
			if got := cgroupFiles(dir).cpuLimit(); got != tc.want {
				t.Errorf("cpuLimit: %v, want %v", got, tc.want)
			}
		})
	}
}
