//go:build ignore

// Command pause is the sandbox ("pause") process of the runbox test cluster's
// pods. Nothing can be pulled on the test machine, so scripts/k8s/build.sh
// builds this statically and scripts/k8s/up.sh imports it into containerd as
// the CRI sandbox image. It sleeps, reaps any child it inherits (it is PID 1 of
// the pod's PID namespace when that namespace is shared) and exits on
// SIGINT/SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("runbox-pause 1")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
