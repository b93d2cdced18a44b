package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// Driver starts boxes on one kind of platform: a Docker-API engine
// (sandbox/docker), a Kubernetes namespace (sandbox/kube) or runc run by
// the server itself (sandbox/oci). It owns the platform's client, its
// hardening profile and its reaper; the run algorithm (admission, pool,
// deadlines, classification) is [BoxRunner]'s.
type Driver interface {
	// Ready checks the platform and prepares what boxes need; cheap once
	// ready. A driver that met a platform failure checks again.
	Ready(ctx context.Context) error
	// ImageDigest names the content of a language's image.
	ImageDigest(ctx context.Context, image string) (string, error)
	// Start starts a box whose runbox-init waits for the server on the
	// box's channel.
	Start(ctx context.Context, spec BoxSpec) (Box, error)
	// Reap removes boxes whose server is gone, and retries this driver's
	// own removals that failed; it returns how many it removed. A box keep
	// holds is never removed, though its server is gone: a store keeps a
	// record of its run for a restarted server ([Options].Keep). keep may
	// be nil.
	Reap(ctx context.Context, keep func(boxID string) bool) (int, error)
	// FindBoxes lists the running boxes that carry all of labels (an
	// empty value: the label with any value): what sessions and kept runs
	// need to outlive a server.
	FindBoxes(ctx context.Context, labels map[string]string) ([]FoundBox, error)
	// Attach opens a running box again (a new channel to its runbox-init).
	Attach(ctx context.Context, id string) (Box, error)
	// MarkKept marks a started box as holding a run a store keeps, with
	// its owner's [Owner].State ([LabelKept]), so that the reaper of a
	// server of another state directory leaves the box when its server
	// dies ([KeptElsewhere]). An owner without a State marks nothing.
	MarkKept(ctx context.Context, boxID string) error
	// Isolation names the isolation level the boxes run under.
	Isolation() string
	// Close releases the platform's client.
	Close() error
}

// Keeper is a Driver that also reaps on its own, besides Reap (Docker,
// when its engine answers again; oci, once it is ready): New hands it
// [Options].Keep before its first reap.
type Keeper interface {
	SetKeep(keep func(boxID string) bool)
}

// BoxSpec is what a box is started for.
type BoxSpec struct {
	Language manifest.Language
	// Labels mark the box as this server's ([Owner.Labels]).
	Labels map[string]string
	// InitArgs are runbox-init's arguments (a prestarted interpreter).
	InitArgs []string
	// Lifetime bounds the box from its start, on platforms that can say
	// so (Kubernetes' activeDeadlineSeconds); the server's own deadlines
	// come first.
	Lifetime time.Duration
	// Session: a session box, which serves many jobs and must accept a
	// new channel after one broke (its stdin stays open between
	// attaches).
	Session bool
	// Limits, when set, replace the manifest's limits for this box.
	Limits *manifest.Limits
	// Mounts are host folders mounted read-only besides the manifest's
	// (a client's roots, [RunRequest].Mounts, [SessionRequest].Mounts).
	Mounts []HostMount
	// Workspace, when set, is a host folder (a named workspace's mount,
	// nosuid,nodev) the box gets writable as /workspace instead of a
	// tmpfs.
	Workspace string
	// WorkspaceVolume, when set, is a named workspace a [VolumeDriver]
	// keeps as its platform's volume: the box gets it writable as
	// /workspace instead of a tmpfs.
	WorkspaceVolume *WorkspaceRef
	// Pooled: the box waits in the pool for a job. A platform that can
	// raise a box's CPU weight later ([Claimer]) starts it with a low one,
	// so that its start-up and preload yield the CPU to running calls.
	Pooled bool
}

// Claimer is a Box started Pooled at a low CPU weight whose platform can
// raise it to a cold box's once a job takes it. The runner calls Claim
// beside the job's exchange, never before it: until it lands the box
// only yields to other boxes, and the call waits for no round trip.
type Claimer interface {
	Claim(ctx context.Context) error
}

// DirectChanneler is a Driver that may reach a session box's runbox-init
// without its engine in between (sandbox/docker direct_linux.go): such a
// box is started listening on its direct socket (initproto
// DirectSocket), and the driver's Exchange dials it when it can.
type DirectChanneler interface {
	DirectChannels() bool
}

// directChannels says whether d's session boxes listen for direct
// channels.
func directChannels(d Driver) bool {
	dc, ok := d.(DirectChanneler)
	return ok && dc.DirectChannels()
}

// Box is one started box.
type Box interface {
	// ID names the box on its platform.
	ID() string
	// Started is when the box started.
	Started() time.Time
	// Exchange opens the box's channel: runbox-init's attached stdin and
	// stdout, which carry the stream multiplexer (internal/initproto).
	Exchange(ctx context.Context) (Conn, error)
	// Kill stops the box at once.
	Kill()
	// Verdict asks the platform what it knows of the box's end.
	Verdict(ctx context.Context, q VerdictQuery) Verdict
	// Alive says whether the box may still take a job.
	Alive() bool
	// Remove deletes the box with a deadline of its own; what fails, the
	// driver's reaper retries.
	Remove()
}

// Conn is a box's channel.
type Conn interface {
	io.ReadWriteCloser
	// Diag is what runbox-init wrote to its stderr, capped.
	Diag() string
}

// LaneDialer is a Conn to a session box's direct socket, which can dial
// it again for a channel's cell lane (internal/initproto lane.go).
type LaneDialer interface {
	DialLane(ctx context.Context) (net.Conn, error)
}

// VerdictQuery says what the runner needs to know.
type VerdictQuery struct {
	// State: the box's end (OOM kill, deadline, loss). The box is
	// waited for, briefly, and killed if it does not end.
	State bool
	// Syscall: the system call the seccomp filter killed the program for,
	// which it was seen to do between Sent and Ended.
	Syscall     bool
	Sent, Ended time.Time
	// Comm, when set, is the kernel's name (comm) of the killed process:
	// the program itself died of the filter, so a record of a process of
	// another name is another box's.
	Comm string
}

// Verdict is the platform's word on a box's end.
type Verdict struct {
	// OOMKilled: the box's memory cgroup killed a process.
	OOMKilled bool
	// Deadline: the platform ended the box at its lifetime.
	Deadline bool
	// Gone says why the platform took the box away (deleted, evicted).
	Gone string
	// Syscall names the forbidden call, when known.
	Syscall string
	// Err is set when the platform could not be asked.
	Err error
}

// EngineError is a failure of the platform or of its set-up, with the one
// thing that fixes it.
type EngineError struct {
	Msg  string
	Hint string
}

func (e *EngineError) Error() string { return e.Msg }

// AsEngineError returns err as an EngineError, wrapping one that is not.
func AsEngineError(err error) *EngineError {
	var ee *EngineError
	if errors.As(err, &ee) {
		return ee
	}
	return &EngineError{Msg: err.Error(), Hint: "Retry once; if it persists, the operator should run `runbox doctor`."}
}

// Deadlines the drivers share. Every platform call has one: a hung engine
// must not hang a call or the server.
const (
	// APITimeout bounds one call of the platform's API.
	APITimeout = 15 * time.Second
	// KillTimeout bounds a kill; past it the channel is cut.
	KillTimeout = 5 * time.Second
	// backstopGrace is how long past the job's deadline the server waits
	// for runbox-init before killing the box itself (box start, the
	// syntax check and the artifact transfer live in it).
	backstopGrace = 10 * time.Second
	// BackstopGrace is backstopGrace for drivers that size lifetimes.
	BackstopGrace = backstopGrace
	reapInterval  = time.Minute
)

// Capped keeps the first Max bytes written to it (runbox-init's stderr,
// for a box that ends without a report).
type Capped struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

func (c *Capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.Max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *Capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}
