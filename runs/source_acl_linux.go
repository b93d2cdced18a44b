package runs

import (
	"os"

	"golang.org/x/sys/unix"
)

const aclXattr = "system.posix_acl_access"

// aclAt is the access ACL of the file at p (not following a link), nil
// when it has none.
func aclAt(p string) []byte {
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(p, aclXattr, buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// aclOf is the access ACL of f, nil when it has none.
func aclOf(f *os.File) []byte {
	buf := make([]byte, 4096)
	n, err := unix.Fgetxattr(int(f.Fd()), aclXattr, buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}
