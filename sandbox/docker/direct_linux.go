//go:build linux

package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// A session box is reached on its direct socket (internal/initproto
// DirectSocket) rather than through the engine's attach when the engine
// runs on this host: the server, root here, dials the box's abstract
// socket from inside the box's network namespace, and the channel joins
// the server and runbox-init alone. Through the attach, a cell's job and
// its report each pass the engine and its shim, two more processes woken
// and copying each way (docs/performance.md). The attach stays open,
// drained, for runbox-init's diagnostics; a box that cannot be dialed is
// served through it, as before.

// DirectChannels: the engine is Docker behind this host's socket, this
// server is root, and boxes run under runc (gVisor's have a network stack
// of their own, out of the host's reach, and Podman's may be rootless).
func (d *Docker) DirectChannels() bool {
	return d.m.Isolation != manifest.IsolationGVisor && !d.podman.Load() && os.Geteuid() == 0 &&
		strings.HasPrefix(d.cli.DaemonHost(), "unix://")
}

// dialDirect connects to session box id's direct socket, dialing again
// while its runbox-init does not listen yet, for at most wait, unless the
// box ended (exited); lane dials the socket again, for a cell lane.
func (d *Docker) dialDirect(ctx context.Context, id string, wait time.Duration, exited <-chan struct{}) (conn net.Conn, lane func() (net.Conn, error), err error) {
	ictx, cancel := context.WithTimeout(ctx, apiTimeout)
	ins, err := d.cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{})
	cancel()
	if err != nil {
		return nil, nil, err
	}
	c := ins.Container
	switch {
	case c.State == nil || !c.State.Running || c.State.Pid <= 0:
		return nil, nil, errors.New("the box is not running")
	case c.Config == nil || c.Config.Labels[sandbox.LabelSession] == "":
		return nil, nil, errors.New("not a session box")
	case c.HostConfig != nil && c.HostConfig.Runtime == RuntimeFor(manifest.IsolationGVisor):
		return nil, nil, errors.New("a gVisor box")
	}
	pid, cid := c.State.Pid, c.ID
	if !inContainer(pid, cid) {
		// Another pid namespace than the engine's (a server in a
		// container of its own): the pid is not the box's here.
		return nil, nil, errors.New("the box's pid is not in this server's view")
	}
	lane = func() (net.Conn, error) {
		if !inContainer(pid, cid) {
			return nil, errors.New("the box's runbox-init is gone")
		}
		return dialIn(pid, initproto.DirectSocket)
	}
	end := time.Now().Add(wait)
	for pause := 2 * time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		conn, err := dialIn(pid, initproto.DirectSocket)
		if err == nil || !errors.Is(err, unix.ECONNREFUSED) || time.Now().After(end) {
			return conn, lane, err
		}
		select {
		case <-time.After(pause):
		case <-exited:
			return nil, nil, errors.New("the box ended")
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// inContainer says whether process pid, as this server sees it, runs in
// the cgroup of container id: the engine's pids are its own namespace's.
func inContainer(pid int, id string) bool {
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && id != "" && strings.Contains(string(cg), id)
}

// dialIn connects to the abstract unix socket name in process pid's
// network namespace and checks that pid itself listens there: a pid
// reused since the engine named it is refused.
func dialIn(pid int, name string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		// Never unlocked: the thread, moved into the box's namespace,
		// ends with this goroutine.
		runtime.LockOSThread()
		c, err := dialInLocked(pid, name)
		done <- dialed{c, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	if err := listenedBy(r.c, pid); err != nil {
		_ = r.c.Close()
		return nil, err
	}
	return r.c, nil
}

func dialInLocked(pid int, name string) (net.Conn, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("entering the box's network namespace: %w", err)
	}
	return net.Dial("unix", name)
}

// listenedBy checks that c's peer, the socket's listener, is pid.
func listenedBy(c net.Conn, pid int) error {
	cred, err := initproto.PeerCred(c)
	if err != nil {
		return err
	}
	if int(cred.Pid) != pid {
		return fmt.Errorf("the socket is pid %d's, not the box's runbox-init (%d)", cred.Pid, pid)
	}
	return nil
}
