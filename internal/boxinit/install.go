//go:build linux

package boxinit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// InstallArg makes runbox-init copy itself to a path and exit: the
// Kubernetes backend's init container puts it into the box's memory volume
// this way, since the init image holds nothing but this binary.
const InstallArg = "__install"

// install copies the running binary to dest, read-only and executable.
func install(dest string) int {
	if err := installTo(dest); err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: install:", err)
		return 1
	}
	return 0
}

func installTo(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	return replaceFile(dest, src, 0o555)
}

// replaceFile writes what src holds to path with mode, all at once: a new
// file renamed over whatever was there, so nothing sees it half written.
func replaceFile(path string, src io.Reader, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".runbox-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
