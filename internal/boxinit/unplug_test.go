//go:build linux

package boxinit

import (
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// unplug, in a network namespace of the test's own with a veth pair
// besides lo, leaves only lo.
func TestUnplugLeavesOnlyLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	type result struct {
		before, after []string
		err           error
	}
	done := make(chan result, 1)
	go func() {
		// This thread moves to a new network namespace and is never
		// given back: it ends with the goroutine.
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		if r.err = unix.Unshare(unix.CLONE_NEWNET); r.err != nil {
			return
		}
		for _, args := range [][]string{{"link", "add", "v0", "type", "veth", "peer", "name", "v1"}, {"link", "set", "v1", "up"}, {"addr", "add", "10.99.0.1/24", "dev", "v1"}, {"link", "set", "lo", "up"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Errorf("ip %v: %v %s", args, err, out)
				return
			}
		}
		r.before = names()
		r.err = unplug()
		r.after = names()
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !slices.Equal(r.before, []string{"lo", "v0", "v1"}) || !slices.Equal(r.after, []string{"lo"}) {
		t.Fatalf("before %v, after %v", r.before, r.after)
	}
}

func names() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}
