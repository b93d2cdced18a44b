//go:build unix

package runs

import (
	"encoding/binary"
	"os"
	"syscall"
)

// sourceOpenFlags open a source without blocking (a FIFO swapped in after
// the check opens at once, and fstat refuses it), without following a
// link swapped in for the file, and without taking a terminal.
const sourceOpenFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOFOLLOW | syscall.O_NOCTTY

// Access bits, as in a mode's rwx triplets.
const (
	mayRead = 4
	mayExec = 1
)

// may says whether the box's user has want on fi (at the host path p, for
// its ACL): the owner's bits for the owner, else the group's for its
// group, else the other bits; and, when the file has an ACL, its named-user
// entry, else its group entries, else its other entry, as the kernel
// decides. The box has no capability that overrides permissions, and no
// supplementary group is counted.
func (b boxIDs) may(fi os.FileInfo, p string, want uint32) bool {
	return b.decide(fi, aclAt(p), want)
}

// mayFile is may for an open file, its ACL read from f.
func (b boxIDs) mayFile(fi os.FileInfo, f *os.File, want uint32) bool {
	return b.decide(fi, aclOf(f), want)
}

// decide grants only what both the mode bits and the ACL (when there is
// one) grant, so that the box could read what it is handed whether or not
// its runtime applies ACLs (gVisor's sentry may not).
func (b boxIDs) decide(fi os.FileInfo, acl []byte, want uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := uint32(fi.Mode().Perm())
	var bits bool
	switch {
	case b.uid == st.Uid:
		bits = mode>>6&want == want
	case b.gid == st.Gid:
		bits = mode>>3&want == want
	default:
		bits = mode&want == want
	}
	if bits && b.uid != st.Uid && len(acl) >= 4 && (len(acl)-4)%8 == 0 {
		return b.decideACL(st, acl[4:], want)
	}
	return bits
}

// ACL entry tags (linux/posix_acl_xattr.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// decideACL is the POSIX ACL check for a user who is not the owner.
func (b boxIDs) decideACL(st *syscall.Stat_t, entries []byte, want uint32) bool {
	mask, other := uint32(7), uint32(0)
	var user, groups []uint32
	for i := 0; i+8 <= len(entries); i += 8 {
		tag := binary.LittleEndian.Uint16(entries[i:])
		perm := uint32(binary.LittleEndian.Uint16(entries[i+2:]))
		id := binary.LittleEndian.Uint32(entries[i+4:])
		switch {
		case tag == aclMask:
			mask = perm
		case tag == aclOther:
			other = perm
		case tag == aclUser && id == b.uid:
			user = append(user, perm)
		case tag == aclGroupObj && st.Gid == b.gid, tag == aclGroup && id == b.gid:
			groups = append(groups, perm)
		}
	}
	if len(user) > 0 {
		return user[0]&mask&want == want
	}
	if len(groups) > 0 {
		for _, g := range groups {
			if g&mask&want == want {
				return true
			}
		}
		return false
	}
	return other&want == want
}
