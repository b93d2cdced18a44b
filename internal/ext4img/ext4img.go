package ext4img

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// CommandTimeout bounds each host command (mkfs, mount).
const CommandTimeout = 60 * time.Second

// Make creates img, a sparse file of size bytes holding an empty ext4 file
// system with no reserved blocks (the size is all the user's), whose root
// uid:gid own. img must not exist.
func Make(ctx context.Context, img string, size int64, uid, gid int) error {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return Run(ctx, CommandTimeout, "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "runbox-ws",
		"-E", fmt.Sprintf("root_owner=%d:%d,nodiscard", uid, gid), img)
}

// Mount mounts img at mp on a loop device, nosuid,nodev,noatime; the loop
// device goes with the last mount.
func Mount(ctx context.Context, img, mp string) error {
	return Run(ctx, CommandTimeout, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", img, mp)
}

// Unmount unmounts mp if it is mounted; a busy mount is detached lazily
// (the kernel lets go of it, and of its loop device, with its last user).
func Unmount(mp string) error {
	if !Mounted(mp) {
		return nil
	}
	ctx := context.Background()
	if err := Run(ctx, 30*time.Second, "umount", mp); err != nil {
		return Run(ctx, 30*time.Second, "umount", "-l", mp)
	}
	return nil
}

// Mounted says whether mp is a mount point of this mount namespace.
func Mounted(mp string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && UnescapeMount(f[4]) == mp {
			return true
		}
	}
	return false
}

// UnescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func UnescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// Attached says whether a loop device is backed by img. Not knowing is
// taken as attached: an image is never mounted twice.
func Attached(ctx context.Context, img string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "losetup", "-j", img).Output()
	return err != nil || strings.TrimSpace(string(out)) != ""
}

// Detached waits up to d for no loop device to be backed by img: the
// kernel lets go of one a moment after its last mount ended.
func Detached(img string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for Attached(context.Background(), img) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// Run runs a host command with a deadline, its output in the error.
func Run(ctx context.Context, timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
