//go:build linux

package boxinit

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// cgroupFiles reads the box's own cgroup from inside: cgroup v1 controllers
// under their own directories, or the v2 unified tree.
type cgroupFiles string

func (root cgroupFiles) path(v1, v2 string) string {
	p := filepath.Join(string(root), v1)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return filepath.Join(string(root), v2)
}

// cgroupOpen holds the cgroup files read so far, open: a box's cgroup
// neither moves nor changes its layout, so each call's figures cost one
// pread per file, not a stat, an open, a read and a close.
var cgroupOpen struct {
	mu    sync.Mutex
	files map[string]*os.File
}

// readFile reads the file of root that holds a figure (v1 or v2, the
// first that exists), through a descriptor kept open; nil when none.
func (root cgroupFiles) readFile(v1, v2 string) []byte {
	key := string(root) + "\x00" + v1
	cgroupOpen.mu.Lock()
	f, ok := cgroupOpen.files[key]
	if !ok {
		f, _ = os.Open(root.path(v1, v2))
		if cgroupOpen.files == nil {
			cgroupOpen.files = map[string]*os.File{}
		}
		// A missing file is remembered too: its figure stays unknown.
		cgroupOpen.files[key] = f
	}
	cgroupOpen.mu.Unlock()
	if f == nil {
		return nil
	}
	buf := make([]byte, 512)
	n, err := preadStart(f, buf)
	if n == 0 && err != nil {
		return nil
	}
	return buf[:n]
}

// preadStart reads the start of f into buf with one pread. A kernel
// file (procfs, cgroupfs) gives all it holds to one read from offset 0
// that has room for it, so the second read ReadAt makes to see the end
// would cost a system call (and the box's seccomp filter) for nothing.
func preadStart(f *os.File, buf []byte) (int, error) {
	c, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	if cerr := c.Read(func(fd uintptr) bool {
		n, err = unix.Pread(int(fd), buf, 0)
		return true
	}); cerr != nil {
		return 0, cerr
	}
	if n < 0 {
		n = 0
	}
	if n == 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

func (root cgroupFiles) peakMemory() int64 {
	return parseInt(root.readFile("memory/memory.max_usage_in_bytes", "memory.peak"))
}

// oomKills is -1 when unknown.
func (root cgroupFiles) oomKills() int64 {
	return parseKey(root.readFile("memory/memory.oom_control", "memory.events"), "oom_kill")
}

func (root cgroupFiles) pidsMaxEvents() int64 {
	return parseKey(root.readFile("pids/pids.events", "pids.events"), "max")
}

// cpuLimit is the box's CPU quota in cores (cgroup v2 cpu.max, or v1's
// quota and period); 0 when it has none or it is unknown.
func (root cgroupFiles) cpuLimit() float64 {
	if b, err := os.ReadFile(filepath.Join(string(root), "cpu.max")); err == nil {
		quota, period, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		return cpuShare(quota, period)
	}
	quota, _ := os.ReadFile(filepath.Join(string(root), "cpu", "cpu.cfs_quota_us"))
	period, _ := os.ReadFile(filepath.Join(string(root), "cpu", "cpu.cfs_period_us"))
	return cpuShare(strings.TrimSpace(string(quota)), strings.TrimSpace(string(period)))
}

// cpuShare is quota over period in cores; 0 for no quota ("max", -1) or
// figures that are not numbers.
func cpuShare(quota, period string) float64 {
	q, err1 := strconv.ParseFloat(quota, 64)
	p, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	return q / p
}

// parseInt is the number b holds; -1 when none.
func parseInt(b []byte) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if b == nil || err != nil {
		return -1
	}
	return n
}

// parseKey is N of the line "key N" of a flat-keyed cgroup file's b; -1
// when unknown.
func parseKey(b []byte, key string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// fullMount names the first mount with no space or no inodes left.
func fullMount(mounts []string) string {
	for _, m := range mounts {
		var st unix.Statfs_t
		if err := unix.Statfs(m, &st); err != nil {
			continue
		}
		if st.Bavail == 0 || (st.Files > 0 && st.Ffree == 0) {
			return m
		}
	}
	return ""
}
