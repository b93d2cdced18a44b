//go:build !unix

package derived

// lockDir is a no-op where flock is not available; the Debian and npm
// steps need a Linux host anyway.
func lockDir(string, Options) (func(), error) { return func() {}, nil }
