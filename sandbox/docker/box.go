package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/sandbox"
)

// exitGrace is how long Remove waits for a box that had its channel to
// exit of itself.
const exitGrace = 2 * time.Second

// box is a started container whose runbox-init waits on the attached
// stdin for the server.
type box struct {
	d        *Docker
	id       string
	att      client.ContainerAttachResult
	stopWait context.CancelFunc
	// exited is closed when the engine's wait for the box's end answers
	// (or fails: waitErr, set before).
	exited  chan struct{}
	waitErr error
	started time.Time
	// lowWeight: a pooled box started at pooledCPUShares, until Claim.
	lowWeight bool
	// exchanged: the box was given its channel, whose end lets
	// runbox-init exit of itself.
	exchanged atomic.Bool
	// direct: a session box whose channel is dialed on its direct socket
	// (direct_linux.go), awaited at most directWait for its runbox-init
	// to listen.
	direct     bool
	directWait time.Duration
}

// directWait bounds how long a session box this server just started is
// dialed before its runbox-init listens; a box found again listens
// already.
const directWait = 3 * time.Second

// Start creates, attaches and starts a box. Attaching before the start
// means no output is ever missed; the wait is registered before the start
// so that the exit is never missed either.
func (d *Docker) Start(ctx context.Context, spec sandbox.BoxSpec) (sandbox.Box, error) {
	b, err := d.start(ctx, spec)
	if err != nil && ctx.Err() == nil && !isImageMissing(err) {
		// The engine went away or changed under us (a server of another
		// version pruned our runbox-init volume between two boxes): check
		// it again, which makes what is missing, and try once more.
		d.invalidate(err)
		if d.Ready(ctx) == nil {
			b, err = d.start(ctx, spec)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			// Check the engine again on the next call.
			d.invalidate(err)
		}
		return nil, engineError(err)
	}
	return b, nil
}

// isImageMissing says whether err is the sandbox image's absence, which a
// second try does not mend.
func isImageMissing(err error) bool {
	var ni noImageError
	return errors.As(err, &ni)
}

func (d *Docker) start(ctx context.Context, spec sandbox.BoxSpec) (*box, error) {
	d.mu.Lock()
	vol := d.initVolume
	d.mu.Unlock()
	m := d.m
	if spec.Limits != nil {
		mm := *d.m
		mm.Limits = *spec.Limits
		m = &mm
	}
	cfg, host := boxSpec(m, spec.Language, spec.Labels, vol, spec.InitArgs)
	host.Mounts = append(host.Mounts, extraMounts(spec.Mounts)...)
	if d.podman.Load() {
		if err := podmanSpec(host); err != nil {
			return nil, err
		}
		// Its stdin ends with this server's attach: a restarted one
		// reaches the box through its relay (relay.go).
		cfg.Cmd = append([]string{initproto.RelayFlag}, cfg.Cmd...)
	} else if err := d.withFolderVolumes(ctx, host); err != nil {
		return nil, err
	}
	withWorkspace(host, spec.Workspace, d.podman.Load())
	lowWeight := spec.Pooled && d.canReweigh()
	if lowWeight {
		host.CPUShares = pooledCPUShares
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	// A name of its own, so that a create the engine carried out after
	// its request gave up (a cancelled start: a server closing while its
	// pool refills, a deadline on a loaded engine) can still be found and
	// removed; the box has no id to remove it by.
	name := boxName()
	created, err := d.cli.ContainerCreate(actx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, imageMissing(spec.Language.Image)
		}
		_ = d.removeContainer(name)
		return nil, err
	}
	b := &box{d: d, id: created.ID, lowWeight: lowWeight, direct: spec.Session && d.DirectChannels(), directWait: directWait}
	fail := func(err error) (*box, error) {
		b.Remove()
		return nil, err
	}
	if b.att, err = d.cli.ContainerAttach(actx, b.id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true}); err != nil {
		return fail(err)
	}
	b.watch(container.WaitConditionNextExit)
	if _, err := d.cli.ContainerStart(actx, b.id, client.ContainerStartOptions{}); err != nil {
		return fail(err)
	}
	b.started = time.Now()
	return b, nil
}

// watch registers the engine's wait for the box's end, under condition,
// and closes b.exited when it answers.
func (b *box) watch(condition container.WaitCondition) {
	ctx, stop := context.WithCancel(context.Background())
	b.stopWait = stop
	b.exited = make(chan struct{})
	w := b.d.cli.ContainerWait(ctx, b.id, client.ContainerWaitOptions{Condition: condition})
	go func() {
		select {
		case <-w.Result:
		case b.waitErr = <-w.Error:
		}
		close(b.exited)
	}()
}

func (b *box) ID() string         { return b.id }
func (b *box) Started() time.Time { return b.started }

// Exchange returns the attach stream as the box's channel: the box's
// stdout demultiplexed from its stderr (runbox-init's diagnostics), and
// its stdin. A session box that can be dialed directly gets its direct
// socket instead, the attach drained beside it for the diagnostics.
func (b *box) Exchange(ctx context.Context) (sandbox.Conn, error) {
	b.exchanged.Store(true)
	diag := &sandbox.Capped{Max: 16 << 10}
	if b.direct {
		nc, lane, err := b.d.dialDirect(ctx, b.id, b.directWait, b.exited)
		if err == nil {
			go func() { _, _ = stdcopy.StdCopy(io.Discard, diag, b.att.Reader) }()
			return &directConn{Conn: nc, att: b.att, diag: diag, lane: lane}, nil
		}
		b.d.log.Debug("docker: no direct channel, the attach carries it", "box", b.id, "err", err)
	}
	pr, pw := io.Pipe()
	c := &conn{att: b.att, r: pr, diag: diag}
	go func() {
		// Draining until the stream ends matters: a reader that stops
		// makes the engine's kill and inspect of the box hang.
		_, err := stdcopy.StdCopy(pw, c.diag, b.att.Reader)
		if errors.Is(err, net.ErrClosed) {
			// Our own close (conn.Close, Remove) ends the channel: its
			// end, not a failure of the engine's, even when it comes
			// before the engine's end of the stream was read.
			err = nil
		}
		pw.CloseWithError(err)
	}()
	return c, nil
}

// conn is a box's attach stream as a channel.
type conn struct {
	att  client.ContainerAttachResult
	r    *io.PipeReader
	diag *sandbox.Capped
}

func (c *conn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *conn) Write(p []byte) (int, error) { return c.att.Conn.Write(p) }
func (c *conn) Diag() string                { return c.diag.String() }
func (c *conn) Close() error {
	c.att.Close()
	return c.r.Close()
}

// directConn is a session box's direct socket as its channel; the
// attach, drained, ends with it.
type directConn struct {
	net.Conn
	att  client.ContainerAttachResult
	diag *sandbox.Capped
	lane func() (net.Conn, error)
}

func (c *directConn) Diag() string { return c.diag.String() }

// DialLane dials the box's direct socket again, for a cell lane.
func (c *directConn) DialLane(context.Context) (net.Conn, error) { return c.lane() }
func (c *directConn) Close() error {
	c.att.Close()
	return c.Conn.Close()
}

// Kill stops the box at once.
func (b *box) Kill() { b.d.kill(b.id) }

// Verdict names a forbidden call from the kernel log and asks the engine
// about the box's end: its OOMKilled is the word on OOM when the box could
// not tell.
func (b *box) Verdict(ctx context.Context, q sandbox.VerdictQuery) sandbox.Verdict {
	var v sandbox.Verdict
	if q.Syscall {
		v.Syscall = b.d.kernelLog.Syscall(q.Sent, q.Ended, b.d.uid(), q.Comm, 200*time.Millisecond)
	}
	if !q.State {
		return v
	}
	select {
	case <-b.exited:
		if b.waitErr != nil {
			b.d.log.Debug("wait", "box", b.id, "err", b.waitErr)
		}
	case <-time.After(killTimeout):
		b.d.kill(b.id)
	}
	ictx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	ins, err := b.d.cli.ContainerInspect(ictx, b.id, client.ContainerInspectOptions{})
	switch {
	case err != nil:
		v.Err = engineError(err)
		b.d.invalidate(err)
	case ins.Container.State != nil:
		v.OOMKilled = ins.Container.State.OOMKilled
	}
	if !v.OOMKilled && v.Err == nil {
		since := q.Sent
		if since.IsZero() {
			since = b.started
		}
		v.OOMKilled = b.d.oomEvent(ctx, b.id, since) || b.d.kernelLog.OOMKilled(b.id, 100*time.Millisecond)
	}
	return v
}

// oomEvent says whether the engine saw the memory cgroup of box id kill a
// process since since. Inspect's OOMKilled is set only when the box's
// first process ends after an OOM event, and the exit may be handled
// before the event: a session's interpreter killed while runbox-init
// lives on, whose report was then lost, shows only as an "oom" event.
func (d *Docker) oomEvent(ctx context.Context, id string, since time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	unix := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	ev := d.cli.Events(ctx, client.EventsListOptions{
		Since:   unix(since.Add(-200 * time.Millisecond)),
		Until:   unix(time.Now()),
		Filters: make(client.Filters).Add("container", id).Add("event", "oom"),
	})
	for {
		select {
		case <-ev.Messages:
			return true
		case err := <-ev.Err:
			if err != nil && !errors.Is(err, io.EOF) {
				d.log.Debug("oom events", "box", id, "err", err)
			}
			return false
		}
	}
}

// Alive says whether the box has not ended (a pooled box must be alive to
// take a job).
func (b *box) Alive() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Remove releases the box's connections and deletes it. A box that had
// its channel is given a moment to exit of itself first (its runbox-init
// does once the server ends the channel): removing a running box costs
// the engine a kill.
func (b *box) Remove() {
	if b.att.Conn != nil {
		b.att.Close()
	}
	if b.exchanged.Load() && b.exited != nil {
		select {
		case <-b.exited:
		case <-time.After(exitGrace):
		}
	}
	if b.stopWait != nil {
		b.stopWait()
	}
	b.d.remove(b.id)
}

func (d *Docker) kill(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	if _, err := d.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		d.log.Debug("kill", "container", id, "err", err)
	}
}

// remove deletes a box with a fresh deadline: it must run even when the
// call's context is gone. What it cannot remove, the reaper will.
func (d *Docker) remove(id string) {
	err := d.removeContainer(id)
	if err != nil && !cerrdefs.IsNotFound(err) {
		d.log.Warn("removing box failed; the reaper will retry", "container", id, "err", err)
		d.mu.Lock()
		d.unremoved[id] = true
		d.mu.Unlock()
	}
}

// boxName is a new box's container name: runbox-box- and 16 random hex
// digits.
func boxName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "runbox-box-" + hex.EncodeToString(b[:])
}

// removeContainer force-removes a container with a fresh deadline. Podman
// (4.3) refuses to while a box is between its exit and its clean-up
// ("container state improper: stopped"); a moment later it can.
func (d *Docker) removeContainer(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	for try := 1; ; try++ {
		_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
		if err == nil || cerrdefs.IsNotFound(err) || !d.podman.Load() || try == 10 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * 50 * time.Millisecond):
		}
	}
}

// ImageDigest returns the image's ID, inspected once per image; probes, the
// result cache and every result name images by it.
func (d *Docker) ImageDigest(ctx context.Context, image string) (string, error) {
	d.mu.Lock()
	digest, ok := d.digests[image]
	d.mu.Unlock()
	if ok {
		return digest, nil
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	ins, err := d.cli.ImageInspect(actx, image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", imageMissing(image)
		}
		return "", engineError(err)
	}
	d.mu.Lock()
	d.digests[image] = ins.ID
	d.mu.Unlock()
	return ins.ID, nil
}
