package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A binary started through a symbolic link (Homebrew's bin/runbox to the
// keg's libexec/runbox) finds runbox-init beside the link's target; one
// with runbox-init beside it uses that.
func TestInitDirOfSymlink(t *testing.T) {
	root := t.TempDir()
	libexec, bin := filepath.Join(root, "libexec"), filepath.Join(root, "bin")
	for _, d := range []string{libexec, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"runbox", "runbox-init-linux-amd64"} {
		if err := os.WriteFile(filepath.Join(libexec, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(bin, "runbox")
	if err := os.Symlink(filepath.Join(libexec, "runbox"), link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if got := initDirOf(link); got != libexec {
		t.Errorf("through the link: %s, want %s", got, libexec)
	}
	if got := initDirOf(filepath.Join(libexec, "runbox")); got != libexec {
		t.Errorf("direct: %s, want %s", got, libexec)
	}
	// runbox-init beside the link wins (make build's bin/).
	if err := os.WriteFile(filepath.Join(bin, "runbox-init-linux-amd64"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := initDirOf(link); got != bin {
		t.Errorf("with runbox-init beside the link: %s, want %s", got, bin)
	}
}

// `GOOS=linux go install .../cmd/runbox-init` beside a `go install`ed
// runbox puts it in linux_<arch>/ of the same bin directory.
func TestReadInitBinaryGoInstall(t *testing.T) {
	bin := t.TempDir()
	if err := os.MkdirAll(filepath.Join(bin, "linux_arm64"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "linux_arm64", "runbox-init"), []byte("init"), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadInitBinary(bin, "aarch64"); err != nil || string(b) != "init" {
		t.Fatalf("ReadInitBinary = %q, %v", b, err)
	}
	if _, err := ReadInitBinary(bin, "x86_64"); err == nil || !strings.Contains(err.Error(), "linux_amd64") {
		t.Fatalf("another architecture: %v", err)
	}
}
