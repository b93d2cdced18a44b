//go:build unix

package derived

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockCache holds an exclusive lock on dir's .lock until the returned
// function is called; a second build waits for the first.
func lockCache(dir string, o Options) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		o.logf("waiting for another build (lock %s)", f.Name())
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { f.Close() }, nil
}
