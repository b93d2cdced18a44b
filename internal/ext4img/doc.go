// Package ext4img makes ext4 image files of a fixed size and mounts them
// on loop devices, nosuid,nodev: the file system enforces the size as a
// quota (a write past it is ENOSPC). It runs the host's mkfs.ext4,
// losetup, mount and umount, so mounting needs root on Linux. It knows
// nothing of boxes or of who uses the file systems: sandbox's named
// workspaces and the test cluster's volume provisioner both build on it.
package ext4img
