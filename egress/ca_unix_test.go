//go:build unix

package egress

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCAFilesAreUntrusted: a FIFO as the CA's certificate and a link as
// its key (the state directory is untrusted input) are neither waited on
// nor followed: a new CA is made and kept in their place.
func TestCAFilesAreUntrusted(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, caCertFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, caKeyFile)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := OpenCA(dir, []string{"api.example"}); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OpenCA hangs on a FIFO")
	}
	for _, f := range []string{caCertFile, caKeyFile} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v", f, fi.Mode(), err)
		}
	}
}
