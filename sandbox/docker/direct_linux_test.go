//go:build linux

package docker

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// A pid is the container's only when its cgroup names the container.
func TestInContainer(t *testing.T) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip("no /proc/self/cgroup")
	}
	if inContainer(os.Getpid(), "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") {
		t.Errorf("this process is in no such container: %s", cg)
	}
	if inContainer(os.Getpid(), "") || inContainer(1<<30, "x") {
		t.Error("no id, or no such pid")
	}
}

// listenedBy takes a connection whose listener is the pid it names, and
// refuses one of another pid.
func TestListenedBy(t *testing.T) {
	name := fmt.Sprintf("@runbox-test-listenedby-%d", os.Getpid())
	l, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := net.Dial("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := listenedBy(c, os.Getpid()); err != nil {
		t.Errorf("our own listener: %v", err)
	}
	if err := listenedBy(c, os.Getpid()+1); err == nil {
		t.Error("another pid's listener taken")
	}
}
