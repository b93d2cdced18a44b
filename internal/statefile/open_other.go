//go:build !unix

package statefile

import (
	"fmt"
	"os"
)

// open refuses a link by lstat first (there is no O_NOFOLLOW here); Open
// checks the opened file's type.
func open(path string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: %w (a link)", path, ErrNotRegular)
	}
	return os.OpenFile(path, flag, perm)
}

func isLink(error) bool { return false }
