//go:build !unix

package derived

// lockCache is a no-op where flock is not available; the Debian and npm
// steps need a Linux host anyway.
func lockCache(string, Options) (func(), error) { return func() {}, nil }
