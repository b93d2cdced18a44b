//go:build !unix

package docker

import "os"

// podmanNproc: see podman_unix.go.
func podmanNproc() int64 { return 32768 }

// fileOwner cannot tell here: seccompFile then refuses (Podman runs on
// Linux, and runbox must run beside it).
func fileOwner(os.FileInfo) (int, bool) { return -1, false }
