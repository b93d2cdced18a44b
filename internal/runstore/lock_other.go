//go:build !unix

package runstore

import (
	"os"
	"sync"
)

// Without flock, a hold is this process's only: servers sharing a state
// directory on such a system may both adopt a run (each then waits for
// the same box's end).
var held sync.Map

func lockFile(f *os.File) bool {
	_, loaded := held.LoadOrStore(f.Name(), true)
	return !loaded
}

func unlockFile(f *os.File) { held.Delete(f.Name()) }
