package runs

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/manifest"
)

// A source gives the box only what the box's user could read at its path:
// the table's files are made by root (the test's user, when it is root)
// for a box running as 1000:1000.
func TestReadSourceAsTheBoxUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files the box's user may not read")
	}
	data := filepath.Join(t.TempDir(), "data")
	must(t, os.MkdirAll(filepath.Join(data, "sub"), 0o755))
	write := func(rel string, mode os.FileMode, uid, gid int) {
		p := filepath.Join(data, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte("content of "+rel), mode))
		must(t, os.Chmod(p, mode))
		must(t, os.Chown(p, uid, gid))
	}
	write("public.txt", 0o644, 0, 0)
	write("private.txt", 0o600, 0, 0)
	write("mine.txt", 0o600, 1000, 0)
	write("group.txt", 0o640, 0, 1000)
	write("othergroup.txt", 0o640, 0, 2000)
	write("closed/inside.txt", 0o644, 0, 0)
	must(t, os.Chmod(filepath.Join(data, "closed"), 0o700))
	write("listonly/inside.txt", 0o644, 0, 0)
	must(t, os.Chmod(filepath.Join(data, "listonly"), 0o744))
	write("acl_denied.txt", 0o644, 0, 0)
	write("acl_granted.txt", 0o600, 0, 0)
	must(t, os.Link(filepath.Join(data, "private.txt"), filepath.Join(data, "hardlink.txt")))
	must(t, os.Symlink("private.txt", filepath.Join(data, "link_to_private")))
	must(t, os.Symlink("/mnt/data/public.txt", filepath.Join(data, "abs_inside")))
	must(t, os.Symlink("/mnt/other/public.txt", filepath.Join(data, "abs_other")))
	must(t, os.Symlink("loop", filepath.Join(data, "loop")))
	must(t, os.Symlink("closed/inside.txt", filepath.Join(data, "via_closed")))
	must(t, syscall.Mkfifo(filepath.Join(data, "fifo"), 0o644))
	must(t, syscall.Mknod(filepath.Join(data, "null"), syscall.S_IFCHR|0o666, 1<<8|3))
	// ACLs as the kernel stores them: header, then (tag, perm, id) entries.
	acl := func(rel string, entries ...[3]uint32) {
		b := binary.LittleEndian.AppendUint32(nil, 2)
		for _, e := range entries {
			b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
			b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
			b = binary.LittleEndian.AppendUint32(b, e[2])
		}
		if err := unix.Setxattr(filepath.Join(data, rel), "system.posix_acl_access", b, 0); err != nil {
			t.Skipf("no POSIX ACLs here: %v", err)
		}
	}
	acl("acl_denied.txt", [3]uint32{aclUserObj, 6, 0}, [3]uint32{aclUser, 0, 1000}, [3]uint32{aclGroupObj, 4, 0}, [3]uint32{aclMask, 4, 0}, [3]uint32{aclOther, 4, 0})
	acl("acl_granted.txt", [3]uint32{aclUserObj, 6, 0}, [3]uint32{aclUser, 4, 1000}, [3]uint32{aclGroupObj, 0, 0}, [3]uint32{aclMask, 4, 0}, [3]uint32{aclOther, 0, 0})

	// A folder the box's user is denied by an ACL, declared through a link.
	denied := filepath.Join(filepath.Dir(data), "denied")
	must(t, os.MkdirAll(denied, 0o755))
	must(t, os.WriteFile(filepath.Join(denied, "f.txt"), []byte("content of denied"), 0o644))
	must(t, os.Symlink(denied, filepath.Join(filepath.Dir(data), "denied_link")))
	acl("../denied", [3]uint32{aclUserObj, 7, 0}, [3]uint32{aclUser, 0, 1000}, [3]uint32{aclGroupObj, 5, 0}, [3]uint32{aclMask, 5, 0}, [3]uint32{aclOther, 5, 0})

	m := manifest.Default()
	m.User = "1000:1000"
	m.Mounts = []manifest.Mount{{Name: "data", Path: data}, {Name: "denied", Path: filepath.Join(filepath.Dir(data), "denied_link")}}
	if got, err := readSource(m, "/mnt/denied/f.txt", 1<<20); err == nil {
		t.Errorf("a folder whose ACL denies the box's user: read %q", got)
	}
	for rel, readable := range map[string]bool{
		"public.txt": true, "mine.txt": true, "group.txt": true, "abs_inside": true,
		"private.txt": false, "othergroup.txt": false, "closed/inside.txt": false, "listonly/inside.txt": false,
		"hardlink.txt": false, "link_to_private": false, "abs_other": false, "loop": false, "via_closed": false,
		"fifo": false, "null": false, "sub": false, "acl_denied.txt": false,
		// Granted by the ACL alone: a runtime that ignores ACLs would not.
		"acl_granted.txt": false,
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err := readSource(m, "/mnt/data/"+rel, 1<<20)
			if readable && (err != nil || !strings.HasPrefix(string(got), "content of ")) {
				t.Errorf("%s: the box may read it, yet %q %v", rel, got, err)
			}
			if !readable && (err == nil || len(got) > 0) {
				t.Errorf("%s: the box may not read it, yet it was read: %q", rel, got)
			}
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: readSource hangs", rel)
		}
	}
}
