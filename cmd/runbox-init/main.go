//go:build linux

// Command runbox-init is the PID 1 of every runbox box: it serves the box's
// side of the channel (a stream multiplexer over its attached stdin and
// stdout), runs the job it receives there and answers with the report and
// the artifacts. See package boxinit.
package main

import (
	"os"

	"github.com/runbox-mcp/runbox/internal/boxinit"
)

func main() {
	os.Exit(boxinit.Main(os.Args, os.Stdin, os.Stdout))
}
