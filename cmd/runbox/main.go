// Command runbox is an MCP server that runs the code AI agents write in
// hardened, ephemeral containers. See `runbox help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Set by the linker: -X main.version=... -X main.commit=... -X main.date=...
var (
	version = "dev"
	commit  = "none"
	date    = "unknown"
)

func main() {
	cfg, err := parse(os.Args[1:])
	if errors.Is(err, errHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go boundStop(ctx, stop)
	code, err := run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// stopBound is how long runbox may take to stop once asked by a signal.
const stopBound = 30 * time.Second

// boundStop waits for the first SIGINT or SIGTERM (ctx done), then gives
// the next one its default effect, killing runbox, and ends runbox itself
// if it has not stopped stopBound later: a stop that waits on something
// stuck (a client that holds stdout but never reads it, so that a write
// blocks) must not leave a server nobody can end but with kill -9.
func boundStop(ctx context.Context, stop context.CancelFunc) {
	<-ctx.Done()
	stop()
	time.Sleep(stopBound)
	fmt.Fprintf(os.Stderr, "runbox: still stopping %s after the signal; exiting now\n", stopBound)
	os.Exit(1)
}
