//go:build unix && !linux

package runs

import "os"

// POSIX ACLs as xattrs are Linux's; elsewhere the mode bits decide.
func aclAt(string) []byte   { return nil }
func aclOf(*os.File) []byte { return nil }
