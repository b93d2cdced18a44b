package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// Run runs one job in a fresh box.
func (d *Docker) Run(ctx context.Context, job contract.Job) contract.Result {
	release, queueMs, refused := d.slots.take(ctx, job, d.m)
	if refused != nil {
		return *refused
	}
	defer release()
	res, digest := d.runReady(ctx, job)
	res.Metrics.QueueMs = queueMs
	res.Isolation = d.m.Isolation
	res.Image = digest
	return res
}

func cancelled() contract.ErrorInfo {
	return contract.ErrorInfo{Kind: contract.KindSandbox, Message: "the call was cancelled before the run finished",
		Hint: "The client cancelled the call; run it again if you still need the result."}
}

func (d *Docker) runReady(ctx context.Context, job contract.Job) (contract.Result, string) {
	fail := func(err error) (contract.Result, string) {
		ee := engineError(err).(*EngineError)
		return contract.Fail(job, contract.ErrorInfo{Kind: contract.KindSandbox, Message: ee.Msg, Hint: ee.Hint}), ""
	}
	if err := d.Ready(ctx); err != nil {
		return fail(err)
	}
	digest, err := d.ImageDigest(ctx, job.Language.Image)
	if err != nil {
		return fail(err)
	}
	o, contents, startup, pooled := d.runBox(ctx, job)
	if o.engineErr != nil {
		// The engine went away or changed under us: check it again on
		// the next call.
		d.invalidate(o.engineErr)
		if o.report == nil && !o.oomKilled && !o.backstop {
			r, _ := fail(o.engineErr)
			return r, digest
		}
	}
	if o.cancelled {
		return contract.Fail(job, cancelled()), digest
	}
	res := buildResult(d.m, job, o, contents)
	res.Metrics.StartupMs = startup
	res.Metrics.Pooled = pooled
	return res, digest
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
		return "", err
	}
	d.mu.Lock()
	d.digests[image] = ins.ID
	d.mu.Unlock()
	return ins.ID, nil
}

// boxOutcome extends outcome with what only the engine path knows.
type boxOutcome struct {
	outcome
	engineErr error
	cancelled bool
}

// box is a started container whose runbox-init waits on the attached
// stdin for its one job.
type box struct {
	id       string
	att      client.ContainerAttachResult
	wait     client.ContainerWaitResult
	stopWait context.CancelFunc
	started  time.Time
	// lean: a pooled box started without its language's preload, because
	// calls were waiting when it was made.
	lean bool
}

// startBox creates, attaches and starts a box. Attaching before the start
// means no output is ever missed; the wait is registered before the start
// so that the exit is never missed either.
func (d *Docker) startBox(ctx context.Context, lang manifest.Language, labels map[string]string, initArgs []string) (*box, error) {
	d.mu.Lock()
	vol := d.initVolume
	d.mu.Unlock()
	cfg, host := boxSpec(d.m, lang, labels, vol, initArgs)
	if d.podman.Load() {
		if err := podmanSpec(host); err != nil {
			return nil, err
		}
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	created, err := d.cli.ContainerCreate(actx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			err = imageMissing(lang.Image)
		}
		return nil, err
	}
	d.mu.Lock()
	d.live[created.ID] = struct{}{}
	d.mu.Unlock()
	b := &box{id: created.ID}
	fail := func(err error) (*box, error) {
		b.close()
		d.remove(b.id)
		return nil, err
	}
	if b.att, err = d.cli.ContainerAttach(actx, b.id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true}); err != nil {
		return fail(err)
	}
	waitCtx, stopWait := context.WithCancel(context.Background())
	b.stopWait = stopWait
	b.wait = d.cli.ContainerWait(waitCtx, b.id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.cli.ContainerStart(actx, b.id, client.ContainerStartOptions{}); err != nil {
		return fail(err)
	}
	b.started = time.Now()
	return b, nil
}

// close releases the box's connections (not the container).
func (b *box) close() {
	if b.att.Conn != nil {
		b.att.Close()
	}
	if b.stopWait != nil {
		b.stopWait()
	}
}

// exited says whether the box has already ended (a pooled box must be
// alive to take a job).
func (b *box) exited() bool {
	select {
	case <-b.wait.Result:
		return true
	case <-b.wait.Error:
		return true
	default:
		return false
	}
}

// runBox runs a job in a fresh box, taken from the pool when one waits.
// The box is removed in a deferred call with its own deadline, whatever
// happened.
func (d *Docker) runBox(ctx context.Context, job contract.Job) (o boxOutcome, contents [][]byte, startupMs int64, pooled bool) {
	t0 := time.Now()
	b := d.pools.take(job.Language.Name)
	if b == nil {
		var err error
		labels := d.owner.Labels(map[string]string{LabelRunID: job.RunID, LabelLanguage: job.Language.Name})
		if b, err = d.startBox(ctx, job.Language, labels, nil); err != nil {
			o.engineErr = err
			return o, nil, 0, false
		}
	} else {
		pooled = true
	}
	d.pools.refill(job.Language.Name)
	// The answer need not wait for the removal: the box is done.
	defer d.removeLater(b)
	startupMs = time.Since(t0).Milliseconds()
	o, contents = d.runOn(ctx, b, job)
	return o, contents, startupMs, pooled
}

// runOn gives a started box its job and collects the outcome.
func (d *Docker) runOn(ctx context.Context, b *box, job contract.Job) (o boxOutcome, contents [][]byte) {
	sent := time.Now()
	go func() {
		// A box that dies before reading its job must not block us.
		_ = json.NewEncoder(b.att.Conn).Encode(initJob(d.m, job))
		_ = b.att.CloseWrite()
	}()

	read := make(chan frames, 1)
	go func() { read <- readFrames(b.att.Reader, maxStream(d.m.Limits)) }()

	backstop := time.NewTimer(job.Timeout + backstopGrace)
	defer backstop.Stop()
	var got frames
	select {
	case got = <-read:
	case <-backstop.C:
		o.backstop = true
		got = d.killAndCollect(b.id, b.att, read)
	case <-ctx.Done():
		o.cancelled = true
		got = d.killAndCollect(b.id, b.att, read)
	}
	o.report, contents = got.report, got.contents
	if o.report == nil {
		o.lost = "the box ended without a report"
		if got.err != nil {
			o.lost += ": " + got.err.Error()
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(got.diag), "\n"); first != "" {
			o.lost += " (runbox-init: " + first + ")"
		}
		d.log.Warn("box ended without a report", "run_id", job.RunID, "err", got.err, "init_stderr", got.diag)
	} else if got.diag != "" {
		d.log.Debug("runbox-init stderr", "run_id", job.RunID, "stderr", got.diag)
	}

	if o.report != nil && seccompDeath(o.report) {
		var ended time.Time
		if ms := o.report.EndedUnixMs; ms > 0 {
			ended = time.UnixMilli(ms)
		}
		o.syscall = d.kernelLog.find(sent, ended, d.uid(), 200*time.Millisecond)
	}
	if !needsEngineVerdict(o) {
		return o, contents
	}
	// The engine's view decides OOM when the box could not tell.
	select {
	case <-b.wait.Result:
	case err := <-b.wait.Error:
		d.log.Debug("wait", "run_id", job.RunID, "err", err)
	case <-time.After(killTimeout):
		d.kill(b.id)
	}
	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
	defer icancel()
	if ins, err := d.cli.ContainerInspect(ictx, b.id, client.ContainerInspectOptions{}); err == nil && ins.Container.State != nil {
		o.oomKilled = ins.Container.State.OOMKilled
	} else if err != nil {
		o.engineErr = err
	}
	return o, contents
}

// needsEngineVerdict says whether the engine must be asked about OOM. The
// box reads its memory cgroup's oom_kill counter itself: when that is 0
// and nothing died of an unexplained SIGKILL, asking again would only add
// two round trips to every call.
func needsEngineVerdict(o boxOutcome) bool {
	rep := o.report
	return rep == nil || rep.OOMKills != 0 || o.backstop || o.cancelled ||
		(rep.Signal == sigKILL && !rep.TimedOut)
}

// removeLater closes a finished box and removes it in the background;
// Close waits for it.
func (d *Docker) removeLater(b *box) {
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		b.close()
		d.remove(b.id)
	}()
}

// killAndCollect kills the box and waits for its stream to end; an engine
// that does not end it in time has the connection cut under it.
func (d *Docker) killAndCollect(id string, att client.ContainerAttachResult, read <-chan frames) frames {
	d.kill(id)
	select {
	case f := <-read:
		return f
	case <-time.After(killTimeout):
		att.Close()
		return <-read
	}
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
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil && !cerrdefs.IsNotFound(err) {
		d.log.Warn("removing box failed; the reaper will retry", "container", id, "err", err)
		d.unremoved[id] = true
		return
	}
	delete(d.live, id)
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

// maxStream bounds what is accepted from a box: the report with its capped
// output plus the artifacts, and room for framing.
func maxStream(l manifest.Limits) int64 {
	return 4*int64(l.OutputBytes) + 2*int64(l.ArtifactBytes) + 4<<20
}

// frames is what came out of a box's stream.
type frames struct {
	report   *initproto.Report
	contents [][]byte
	diag     string // runbox-init's own stderr
	err      error
}

// readFrames demultiplexes the attach stream and parses runbox-init's
// frames. It returns as soon as the report and its artifacts are in (the
// engine's end of the stream comes only after it has processed the box's
// exit), and keeps draining the stream in the background until it ends or
// the connection is closed: a reader that stops draining makes the
// engine's kill and inspect of the box hang.
func readFrames(stream io.Reader, max int64) frames {
	pr, pw := io.Pipe()
	diag := &capped{max: 16 << 10}
	go func() {
		_, err := stdcopy.StdCopy(pw, diag, stream)
		pw.CloseWithError(err)
	}()
	return parseFrames(pr, diag, max)
}

// parseFrames parses runbox-init's frames from its plain stdout; diag
// collects its stderr. Like readFrames, it keeps draining stdout in the
// background once the report and its artifacts are in.
func parseFrames(pr io.Reader, diag *capped, max int64) frames {
	var f frames
	r := initproto.NewReader(&limitReader{r: pr, n: max})
	expect := -1
	for expect < 0 || len(f.contents) < expect {
		typ, payload, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				f.err = err
			}
			break
		}
		switch {
		case typ == initproto.FrameReport && f.report == nil:
			var rep initproto.Report
			if err := json.Unmarshal(payload, &rep); err != nil {
				f.err = fmt.Errorf("bad report: %w", err)
				break
			}
			f.report = &rep
			expect = 0
			for _, a := range rep.Artifacts {
				if a.Sent {
					expect++
				}
			}
		case typ == initproto.FrameArtifact && len(f.contents) < expect:
			f.contents = append(f.contents, payload)
		default:
			f.err = fmt.Errorf("unexpected frame %q", typ)
		}
		if f.err != nil {
			break
		}
	}
	if f.report != nil && len(f.contents) != expect {
		f.err = fmt.Errorf("got %d of %d artifacts", len(f.contents), expect)
		f.report = nil
	}
	if f.report == nil {
		// Without a report the stream's end is all there is to wait for;
		// runbox-init's stderr then says why.
		_, _ = io.Copy(io.Discard, pr)
		f.diag = diag.String()
		return f
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	f.diag = diag.String()
	return f
}

// limitReader fails past n bytes instead of returning EOF, so an
// oversized stream is an error, not a silently cut frame.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("box stream exceeds its limit")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}
