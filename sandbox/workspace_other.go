//go:build !unix

package sandbox

import (
	"errors"
	"os"
)

// lockWorkspace: workspaces need a Linux host, which mounts them.
func lockWorkspace(string) (*os.File, error) {
	return nil, errors.New("named workspaces need a Linux host")
}

func statfsFree(string) (int64, bool) { return 0, false }
