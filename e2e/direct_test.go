//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/sandbox"
)

// TestDirectChannel: on Docker under runc, a session box's channel is its
// direct socket (internal/initproto DirectSocket), not the engine's
// attach: the box's own network namespace holds runbox-init's listener
// and the server's connections to it: the channel and the lane its
// cells take. The program can neither take the
// name nor be answered there, and the session keeps its state.
func TestDirectChannel(t *testing.T) {
	s := dockerServer(t, "")
	id := s.open(t, "python")
	mustOK(t, s.in(t, id, "python", "x = 41"))
	boxes := engineBoxes(t, "", strconv.Itoa(s.cmd.Process.Pid), "label="+sandbox.LabelSession)
	if len(boxes) != 1 {
		t.Fatalf("session boxes: %v", boxes)
	}
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", boxes[0]).Output()
	if err != nil {
		t.Fatal(err)
	}
	// /proc/net/unix of the box's namespace: the listener and the
	// connections it accepted carry the name, the latter connected (03):
	// the channel's and its cell lane's.
	unixes, err := os.ReadFile("/proc/" + strings.TrimSpace(string(out)) + "/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	connected := 0
	for _, line := range strings.Split(string(unixes), "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && f[7] == "@runbox-init/direct" && f[5] == "03" {
			connected++
		}
	}
	if connected != 2 {
		t.Fatalf("%d connections on the box's direct socket, want the channel's and its lane's:\n%s", connected, unixes)
	}

	r := s.in(t, id, "python", takeSocket("runbox-init/direct")+"x += 1\nprint(x)\n")
	mustOK(t, r)
	if r.Stdout != "bind EADDRINUSE\nanswered b''\n42\n" {
		t.Errorf("the program reached the direct socket, or the session lost its state:\n%s", r.Stdout)
	}
}
