//go:build unix

package runstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestHostileFilesNeverHang: a FIFO named as a record (the one asked for,
// and another the sweep and the bounds read), a link to an endless device,
// a link to a record outside the store, a file past the bound and a link
// planted as a record's lock are skipped, at once: Get, List, Put, Sweep
// and Hold answer, and never read through a link.
func TestHostileFilesNeverHang(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{MaxBytes: 1 << 20, MaxEntries: 3})
	for _, name := range []string{"run-r_fifo.json", "zz.json"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	rec, _ := json.Marshal(Entry{Kind: "run", ID: "r_link", Finished: true, Updated: time.Now(), Data: json.RawMessage(`{}`)})
	if err := os.WriteFile(outside, rec, 0o600); err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(Entry{Kind: "run", ID: "r_big", Updated: time.Now(), Data: data(2 << 20)})
	if err := os.WriteFile(filepath.Join(dir, "run-r_big.json"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	for link, target := range map[string]string{"run-r_zero.json": "/dev/zero", "run-r_link.json": outside, "locks/run-r_held.lock": victim} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, id := range []string{"r_fifo", "r_zero", "r_link", "r_big"} {
			if e, ok := s.Get("run", id); ok {
				t.Errorf("Get(%s) = %+v", id, e)
			}
		}
		if l := s.List("run"); len(l) != 0 {
			t.Errorf("List = %+v", l)
		}
		if err := s.Put(Entry{Kind: "run", ID: "r_ok", Data: json.RawMessage(`{}`)}); err != nil {
			t.Errorf("Put: %v", err)
		}
		s.Sweep(nil)
		if _, ok := s.Hold("run", "r_held"); ok {
			t.Error("a lock through a planted link was taken")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the store hangs on a file that is not a record")
	}
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Errorf("the lock's link was followed: %v", err)
	}
	if _, ok := s.Get("run", "r_ok"); !ok {
		t.Error("the store's own record is not read back")
	}
}
