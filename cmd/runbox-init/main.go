//go:build linux

// Command runbox-init is the PID 1 of every runbox box: it receives one job
// on stdin, runs it, and reports on stdout. See package boxinit.
package main

import (
	"os"

	"github.com/runbox-mcp/runbox/internal/boxinit"
)

func main() {
	os.Exit(boxinit.Main(os.Args, os.Stdin, os.Stdout))
}
