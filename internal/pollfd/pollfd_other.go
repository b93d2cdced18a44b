//go:build !linux

package pollfd

import "io"

// Pollable is r as it is: only Linux's pipes are made pollable here.
func Pollable(r io.Reader) io.Reader { return r }
