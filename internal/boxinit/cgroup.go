//go:build linux

package boxinit

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

func (root cgroupFiles) peakMemory() int64 {
	return readInt(root.path("memory/memory.max_usage_in_bytes", "memory.peak"))
}

// oomKills is -1 when unknown.
func (root cgroupFiles) oomKills() int64 {
	return readKey(root.path("memory/memory.oom_control", "memory.events"), "oom_kill")
}

func (root cgroupFiles) pidsMaxEvents() int64 {
	return readKey(root.path("pids/pids.events", "pids.events"), "max")
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// readKey reads "key N" from a flat-keyed cgroup file; -1 when unknown.
func readKey(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
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
