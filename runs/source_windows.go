package runs

import "os"

// On Windows a folder reaches the box through the engine's file sharing,
// which has no uid of the box to check against: the box reads what the
// server reads, and the file type alone is checked.
const sourceOpenFlags = os.O_RDONLY

const (
	mayRead = 4
	mayExec = 1
)

func (b boxIDs) may(os.FileInfo, string, uint32) bool       { return true }
func (b boxIDs) mayFile(os.FileInfo, *os.File, uint32) bool { return true }
