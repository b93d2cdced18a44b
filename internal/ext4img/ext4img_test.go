package ext4img

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:        "/a b",
		`/tab\011x`:      "/tab\tx",
		`/nl\012x`:       "/nl\nx",
		`/back\134x`:     `/back\x`,
		`/plain/path`:    "/plain/path",
		`/x\040\040\134`: `/x  \`,
	} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// An image made, mounted nosuid,nodev on a loop device whose file system
// is the quota (ENOSPC past it), unmounted and let go (root only).
func TestMakeMountUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	ctx := context.Background()
	dir := t.TempDir()
	img, mp := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Make(ctx, img, 16<<20, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	if err := Make(ctx, img, 16<<20, 0, 0); err == nil {
		t.Fatal("made over an existing image")
	}
	if Attached(ctx, img) {
		t.Fatal("attached before its mount")
	}
	if err := Mount(ctx, img, mp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Unmount(mp) })
	if !Mounted(mp) || !Attached(ctx, img) {
		t.Fatal("not mounted on a loop device")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(mp, &st); err != nil || st.Uid != 1000 || st.Gid != 1001 {
		t.Fatalf("the root is %d:%d (%v), want 1000:1001", st.Uid, st.Gid, err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(mp, &fs); err != nil || fs.Flags&(syscall.MS_NOSUID|syscall.MS_NODEV) != syscall.MS_NOSUID|syscall.MS_NODEV {
		t.Fatalf("mount flags %#x (%v), want nosuid,nodev", fs.Flags, err)
	}
	var err error
	for i := 0; i < 32 && err == nil; i++ {
		err = os.WriteFile(filepath.Join(mp, "f"+string(rune('a'+i))), make([]byte, 1<<20), 0o644)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("past 16 MiB: %v", err)
	}
	if err := Unmount(mp); err != nil || Mounted(mp) {
		t.Fatalf("unmount: %v, still mounted %v", err, Mounted(mp))
	}
	if !Detached(img, 5*time.Second) {
		t.Fatal("the loop device still holds the image")
	}
	if err := Unmount(mp); err != nil {
		t.Fatalf("unmounting what is not mounted: %v", err)
	}
}
