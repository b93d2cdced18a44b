//go:build unix

package docker

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// podmanNproc is what a rootful Podman service sets its own RLIMIT_NPROC
// to at start (32768, measured), so its runtime may always give it to a
// box, and never more than the server's own hard limit (a local service
// was started under the same). Far above what the pids limit lets boxes
// reach.
func podmanNproc() int64 {
	const service = 32768
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &r); err == nil && r.Max < service {
		return int64(r.Max)
	}
	return service
}

// fileOwner is the uid that owns fi.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
