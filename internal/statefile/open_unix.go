//go:build unix

package statefile

import (
	"errors"
	"os"
	"syscall"
)

func open(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
}

// isLink says whether err is the refusal of O_NOFOLLOW at a link (ELOOP;
// EMLINK on some BSDs).
func isLink(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}
