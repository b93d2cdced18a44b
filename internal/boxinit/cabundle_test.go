//go:build linux

package boxinit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteCABundle(t *testing.T) {
	dir := t.TempDir()
	system := filepath.Join(dir, "system.crt")
	os.WriteFile(system, []byte("SYSTEM"), 0o644)
	path := filepath.Join(dir, "sub", "bundle.crt")
	for range 2 {
		if err := writeCABundle(path, []string{filepath.Join(dir, "none"), system}, []byte("RUNBOX\n")); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	st, _ := os.Stat(path)
	if err != nil || string(b) != "SYSTEM\nRUNBOX\n" || st.Mode().Perm() != 0o444 {
		t.Fatalf("%q %v %v", b, st.Mode(), err)
	}
	// An image without system CAs: runbox's alone.
	if err := writeCABundle(path, []string{filepath.Join(dir, "none")}, []byte("RUNBOX\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "RUNBOX\n" {
		t.Fatalf("%q", b)
	}
}
