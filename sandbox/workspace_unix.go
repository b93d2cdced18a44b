//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// lockWorkspace takes the flock of path without waiting: nil, nil when
// another holder has it. The kernel releases it however its process dies.
func lockWorkspace(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// statfsFree is the free bytes of the file system mounted at mp, when
// one is.
func statfsFree(mp string) (int64, bool) {
	if !mounted(mp) {
		return 0, false
	}
	var st syscall.Statfs_t
	if syscall.Statfs(mp, &st) != nil {
		return 0, false
	}
	return int64(st.Bfree) * int64(st.Bsize), true
}
