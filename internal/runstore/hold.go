package runstore

import (
	"os"
	"path/filepath"

	"github.com/runbox-mcp/runbox/internal/statefile"
)

// Hold takes kind's record id for this process: the server that runs (or
// adopted) a record's run holds it until the run ends, so that no other
// server sharing the directory adopts it too. ok is false when another
// holds it (another server, alive, or this process already). The hold
// dies with the process, however it dies.
func (s *Store) Hold(kind, id string) (release func(), ok bool) {
	if _, err := name(kind, id); err != nil {
		return func() {}, false
	}
	return s.tryHold(kind, id)
}

func (s *Store) tryHold(kind, id string) (func(), bool) {
	dir := filepath.Join(s.dir, "locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}, false
	}
	// The lock directory and its files are untrusted as the records are:
	// a link is not followed (nothing is created or locked elsewhere),
	// and a FIFO or device is refused without blocking.
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return func() {}, false
	}
	path := filepath.Join(dir, kind+"-"+id+".lock")
	f, err := statefile.Open(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}, false
	}
	if !lockFile(f) {
		_ = f.Close()
		return func() {}, false
	}
	// The lock file may have been removed (by its last holder) between
	// the open and the lock: a lock on a removed file holds nothing.
	if fi, err := f.Stat(); err != nil {
		unlockFile(f)
		_ = f.Close()
		return func() {}, false
	} else if pi, err := os.Stat(path); err != nil || !os.SameFile(fi, pi) {
		unlockFile(f)
		_ = f.Close()
		return func() {}, false
	}
	return func() {
		_ = os.Remove(path)
		unlockFile(f)
		_ = f.Close()
	}, true
}
