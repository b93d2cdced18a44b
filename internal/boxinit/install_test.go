//go:build linux

package boxinit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestInstallCopiesItself(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "runbox-init")
	if code := Main([]string{"runbox-init", InstallArg, dest}, nil, nil); code != 0 {
		t.Fatalf("exit %d", code)
	}
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("copy differs (err %v)", err)
	}
	st, _ := os.Stat(dest)
	if st.Mode().Perm() != 0o555 {
		t.Fatalf("mode %v, want 0555", st.Mode().Perm())
	}
	if code := Main([]string{"runbox-init", InstallArg, "/nonexistent/dir/x"}, nil, nil); code == 0 {
		t.Fatal("install into a missing directory succeeded")
	}
}
