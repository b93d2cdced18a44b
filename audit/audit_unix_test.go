//go:build unix

package audit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// TestLogIsARegularFile: a FIFO or a link where the log goes (a state
// file, untrusted) fails the open at once, never blocks it, and nothing is
// written through the link.
func TestLogIsARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link} {
		done := make(chan error, 1)
		go func() {
			l, err := Open(manifest.Audit{Enabled: true, Path: path, MaxBytes: 1 << 20, Keep: 1})
			if err == nil {
				l.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: the log opened", path)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the open hangs", path)
		}
		done2 := make(chan error, 1)
		go func() { _, err := Read(path, 0); done2 <- err }()
		select {
		case <-done2:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the read hangs", path)
		}
	}
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Errorf("the log was written through its link: %v", err)
	}
}
