//go:build unix

package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadTakesRegularFilesOnly: a regular file is read; a FIFO (with no
// writer: a blocking open would hang), a link (to a file or to an endless
// device), a device, a directory and a file past the bound are refused, at
// once.
func TestReadTakesRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "record.json")
	if err := os.WriteFile(regular, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(regular, 5); err != nil || string(b) != "hello" {
		t.Fatalf("regular: %q %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link.json": regular, "zero.json": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]error{
		fifo:                            ErrNotRegular,
		filepath.Join(dir, "link.json"): ErrNotRegular,
		filepath.Join(dir, "zero.json"): ErrNotRegular,
		"/dev/null":                     ErrNotRegular,
		dir:                             ErrNotRegular,
		regular:                         ErrTooLarge,
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(path, 4); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the read hangs", path)
		}
	}
}

// TestOpenForWritingTakesRegularFilesOnly: opening to write (a lock, the
// audit log) neither blocks on a FIFO nor follows a link; a new file is
// created.
func TestOpenForWritingTakesRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "audit.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	link := filepath.Join(dir, "x.lock")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link} {
		done := make(chan error, 1)
		go func() {
			f, err := Open(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s opened", path)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the open hangs", path)
		}
	}
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Errorf("the link's target was created: %v", err)
	}
	f, err := Open(filepath.Join(dir, "new.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
