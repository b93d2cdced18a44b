package docker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// testSpec is a one-off box's spec, labelled as the runner does.
func testSpec(d *Docker) sandbox.BoxSpec {
	lang, _ := d.m.Language("python")
	return sandbox.BoxSpec{Language: lang, InitArgs: []string{"--preload", "python"},
		Labels: d.owner.Labels(map[string]string{sandbox.LabelRunID: "r_test"})}
}

// startBox starts a box on the fake engine and returns it with the
// engine's record of it.
func startBox(t *testing.T, d *Docker, e *fakeEngine, spec sandbox.BoxSpec) (*box, *fakeBox) {
	t.Helper()
	b, err := d.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	fb := e.box(b.ID())
	if fb == nil || e.state(b.ID()) != container.StateRunning {
		t.Fatalf("the engine has no running box %s", b.ID())
	}
	return b.(*box), fb
}

// The box's profile reaches the engine as sent over the wire, in the
// request the engine reads: every item of the hardening, as JSON fields
// the engine would otherwise fill with its defaults.
func TestStartSendsTheProfile(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	spec := testSpec(d)
	b, fb := startBox(t, d, e, spec)
	defer b.Remove()

	cfg, host := fb.req.Config, fb.req.HostConfig
	lim := d.m.Limits
	if cfg.Image != spec.Language.Image || !slices.Equal(cfg.Entrypoint, []string{sandbox.InitPath}) || !slices.Equal(cfg.Cmd, spec.InitArgs) ||
		cfg.User != d.m.User || !cfg.NetworkDisabled || !cfg.OpenStdin || cfg.StdinOnce || cfg.Tty || len(cfg.Env) != 0 {
		t.Errorf("config %+v", cfg)
	}
	if cfg.Labels[sandbox.LabelRunID] != "r_test" || cfg.Labels[sandbox.LabelManaged] != "true" || cfg.Labels[sandbox.LabelInstance] != d.owner.Instance {
		t.Errorf("labels %v", cfg.Labels)
	}
	if host.NetworkMode != "none" || !slices.Equal(host.CapDrop, []string{"ALL"}) || len(host.CapAdd) != 0 || !host.ReadonlyRootfs ||
		host.Privileged || host.IpcMode != container.IPCModeNone || host.LogConfig.Type != "none" || host.Runtime != "runc" {
		t.Errorf("host config %+v", host)
	}
	if host.Memory != int64(lim.Memory) || host.MemorySwap != host.Memory || host.NanoCPUs != int64(lim.CPUs*1e9) ||
		host.PidsLimit == nil || *host.PidsLimit != lim.Pids || host.CPUShares != 0 {
		t.Errorf("resources: memory %d swap %d cpus %d pids %v shares %d", host.Memory, host.MemorySwap, host.NanoCPUs, host.PidsLimit, host.CPUShares)
	}
	var seccomp map[string]any
	if len(host.SecurityOpt) != 2 || host.SecurityOpt[0] != "no-new-privileges" ||
		json.Unmarshal([]byte(strings.TrimPrefix(host.SecurityOpt[1], "seccomp=")), &seccomp) != nil || seccomp["defaultAction"] != "SCMP_ACT_ERRNO" {
		t.Errorf("security opts: want no-new-privileges and the seccomp profile inline, got %.200q", host.SecurityOpt)
	}
	if len(host.Mounts) != 1 || host.Mounts[0].Source != d.initVolume || host.Mounts[0].Target != sandbox.InitDir || !host.Mounts[0].ReadOnly {
		t.Errorf("mounts %+v (want runbox-init's volume %s, read-only)", host.Mounts, d.initVolume)
	}
	// Fields an engine defaults when they are absent: they must be on the
	// wire, not only in the struct (docker-init would be PID 1 without
	// Init: false on an engine whose default is init).
	hc := fb.raw["HostConfig"].(map[string]any)
	for _, f := range []string{"Init", "ReadonlyRootfs", "CapDrop", "PidsLimit", "Memory", "MemorySwap", "NanoCpus", "NetworkMode", "MaskedPaths", "ReadonlyPaths", "Tmpfs", "Ulimits"} {
		if _, ok := hc[f]; !ok {
			t.Errorf("HostConfig.%s is not sent", f)
		}
	}
	if hc["Init"] != false {
		t.Errorf("HostConfig.Init = %v, want false", hc["Init"])
	}
	// Attached and waited for before the start: no output and no exit
	// can be missed.
	var order []string
	for _, r := range e.requests() {
		if strings.Contains(r, b.id) {
			order = append(order, strings.TrimPrefix(strings.Fields(r)[1], "/containers/"+b.id+"/"))
		}
	}
	if want := []string{"attach", "wait", "start"}; !slices.Equal(order, want) {
		t.Errorf("requests on the box %v, want %v", order, want)
	}
	if b.ID() != fb.id || b.Started().IsZero() || !b.Alive() {
		t.Errorf("box %s started %v alive %v", b.ID(), b.Started(), b.Alive())
	}
}

// The limits of a spec replace the manifest's, and a session box keeps
// its stdin open between attaches.
func TestStartSessionLimits(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	spec := testSpec(d)
	lim := d.m.Limits
	lim.Memory, lim.Pids = 256<<20, 33
	spec.Limits, spec.Session = &lim, true
	b, fb := startBox(t, d, e, spec)
	defer b.Remove()
	if fb.req.Config.StdinOnce || fb.req.HostConfig.Memory != 256<<20 || *fb.req.HostConfig.PidsLimit != 33 {
		t.Errorf("session box: stdin once %v memory %d pids %d", fb.req.Config.StdinOnce, fb.req.HostConfig.Memory, *fb.req.HostConfig.PidsLimit)
	}
	if d.m.Limits.Memory == 256<<20 {
		t.Error("the spec's limits changed the manifest")
	}
}

// The attach stream is the box's channel: what the driver writes reaches
// the box's stdin, the box's stdout comes back demultiplexed, its stderr
// (runbox-init's diagnostics) goes to Diag, and the stream ends with the
// box.
func TestExchangeOverTheAttachStream(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	b, fb := startBox(t, d, e, testSpec(d))
	defer b.Remove()
	c, err := b.Exchange(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("job\n")); err != nil {
		t.Fatal(err)
	}
	if got := fb.hear(t, 4); got != "job\n" {
		t.Errorf("stdin %q", got)
	}
	fb.say(t, 2, "init: diag\n")
	fb.say(t, 1, "result")
	buf := make([]byte, 6)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "result" {
		t.Fatalf("stdout %q %v", buf, err)
	}
	e.exit(b.id, 0, false)
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Errorf("after the box's end: %q %v", rest, err)
	}
	if c.Diag() != "init: diag\n" {
		t.Errorf("diag %q", c.Diag())
	}
	waitFor(t, "the box is seen ended", func() bool { return !b.Alive() })
}

// The engine's word on a box's end: its OOMKilled state, else an oom
// event in the box's time; a box that ended without either was not OOM
// killed.
func TestVerdictOOM(t *testing.T) {
	for _, c := range []struct {
		name           string
		inspect, event bool
	}{{"inspect", true, false}, {"event", false, true}, {"neither", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			e := newFakeEngine(t)
			d := newDocker(t, e, nil)
			b, _ := startBox(t, d, e, testSpec(d))
			defer b.Remove()
			sent := time.Now()
			if c.event {
				e.oomEvent(b.id)
			}
			e.exit(b.id, 137, c.inspect)
			v := b.Verdict(context.Background(), sandbox.VerdictQuery{State: true, Sent: sent, Ended: time.Now()})
			if v.Err != nil || v.OOMKilled != (c.inspect || c.event) || v.Gone != "" || v.Deadline {
				t.Errorf("verdict %+v", v)
			}
			if n := e.count("POST /containers/" + b.id + "/kill"); n != 0 {
				t.Errorf("an ended box was killed %d times", n)
			}
		})
	}
	// Another box's oom event is not this box's.
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	b, _ := startBox(t, d, e, testSpec(d))
	defer b.Remove()
	e.oomEvent(strings.Repeat("f", 64))
	e.exit(b.id, 137, false)
	if v := b.Verdict(context.Background(), sandbox.VerdictQuery{State: true}); v.OOMKilled {
		t.Errorf("another box's oom event: %+v", v)
	}
	// Without State, the engine is not asked.
	before := e.count("GET /containers/" + b.id + "/json")
	if v := b.Verdict(context.Background(), sandbox.VerdictQuery{}); v != (sandbox.Verdict{}) || e.count("GET /containers/"+b.id+"/json") != before {
		t.Errorf("a verdict without State asked the engine: %+v", v)
	}
}

// A box that does not end after its run is killed (SIGKILL) before its
// state is read.
func TestVerdictKillsABoxThatRunsOn(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	b, fb := startBox(t, d, e, testSpec(d))
	defer b.Remove()
	v := b.Verdict(context.Background(), sandbox.VerdictQuery{State: true})
	if v.Err != nil || v.OOMKilled {
		t.Errorf("verdict %+v", v)
	}
	if e.state(b.id) != container.StateExited || !slices.Equal(e.kills(fb), []string{"KILL"}) {
		t.Errorf("box state %s kills %v", e.state(b.id), e.kills(fb))
	}
	if b.Alive() {
		t.Error("a killed box is alive")
	}
}

// A box removed behind the driver's back (`docker rm -f`): its verdict
// says the engine could not be asked, as an engine error, and the engine
// is checked again on the next call.
func TestVerdictOfAVanishedBox(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	b, _ := startBox(t, d, e, testSpec(d))
	e.vanish(b.id)
	v := b.Verdict(context.Background(), sandbox.VerdictQuery{State: true})
	var ee *sandbox.EngineError
	if !errors.As(v.Err, &ee) || !strings.Contains(ee.Msg, "No such container") || v.OOMKilled {
		t.Errorf("verdict %+v", v)
	}
	infos := e.count("GET /info")
	if err := d.Ready(context.Background()); err != nil || e.count("GET /info") != infos+1 {
		t.Errorf("Ready after a failed inspect: %v, /info asked %d times more", err, e.count("GET /info")-infos)
	}
	// Killing and removing a box that is gone is quiet, and leaves
	// nothing for the reaper.
	b.Kill()
	b.Remove()
	if len(d.unremoved) != 0 {
		t.Errorf("unremoved %v", d.unremoved)
	}
}

// Kill sends SIGKILL; Remove force-removes the box and ends its stream.
func TestKillAndRemove(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	b, fb := startBox(t, d, e, testSpec(d))
	c, _ := b.Exchange(context.Background())
	b.Kill()
	if !slices.Equal(e.kills(fb), []string{"KILL"}) || e.state(b.id) != container.StateExited {
		t.Errorf("kill: %v, state %s", e.kills(fb), e.state(b.id))
	}
	b.Remove()
	if e.box(b.id) != nil || !slices.Contains(e.requests(), "DELETE /containers/"+b.id) {
		t.Errorf("the box is still on the engine: %v", e.requests())
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("the stream after removal: %v", err)
	}
}

// The sandbox image's absence is said as such, with its fix; no second
// try, and the engine is not suspected.
func TestStartImageMissing(t *testing.T) {
	e := newFakeEngine(t)
	e.addImage("runbox/sandbox:gone", "sha256:00") // there for runbox-init's volume
	d := newDocker(t, e, func(m *manifest.Manifest) { m.Languages[0].Image = "runbox/sandbox:gone" })
	e.removeImage("runbox/sandbox:gone") // gone by the box's start
	creates := e.count("POST /containers/create")
	_, err := d.Start(context.Background(), sandbox.BoxSpec{Language: d.m.Languages[0], Labels: d.owner.Labels(nil)})
	var ee *sandbox.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "runbox/sandbox:gone is missing") || !strings.Contains(ee.Hint, "runbox setup") {
		t.Fatalf("Start: %v", err)
	}
	if n := e.count("POST /containers/create") - creates; n != 1 {
		t.Errorf("%d creates, want 1 (a missing image is not retried)", n)
	}
	if e.boxCount() != 0 {
		t.Errorf("%d boxes left", e.boxCount())
	}
}

// A start the engine refuses once (our runbox-init volume pruned by a
// server of another version) is tried once more after the engine is
// checked again; the box of the failed try is removed.
func TestStartRetriesOnceAfterTheEngineChanged(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	infos := e.count("GET /info")
	e.failNext("start", 500, "error while mounting volume: no such volume", 1)
	b, fb := startBox(t, d, e, testSpec(d))
	defer b.Remove()
	if n := e.count("GET /info") - infos; n != 1 {
		t.Errorf("the engine was checked %d times between the tries, want 1", n)
	}
	if len(e.created) < 2 || e.box(e.created[len(e.created)-2].id) != nil || fb != e.created[len(e.created)-1] {
		t.Errorf("the failed try's box is left: %d boxes on the engine", e.boxCount())
	}
}

// A start the engine keeps refusing fails as an engine error that says
// so, leaves no box, and has the engine checked again on the next call.
func TestStartRefused(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	e.failNext("start", 500, "OCI runtime create failed", -1)
	_, err := d.Start(context.Background(), testSpec(d))
	var ee *sandbox.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "refused a request") || !strings.Contains(ee.Msg, "OCI runtime create failed") || ee.Hint == "" {
		t.Fatalf("Start: %v", err)
	}
	if n := e.boxCount(); n != 0 {
		t.Errorf("%d boxes left on the engine", n)
	}
	infos := e.count("GET /info")
	_ = d.Ready(context.Background())
	if e.count("GET /info") != infos+1 {
		t.Error("Ready did not check the engine again after a refused start")
	}
	// An attach the engine refuses: the same, once the engine answers.
	e.clearFail("start")
	e.failNext("attach", 500, "attach failed", -1)
	if _, err := d.Start(context.Background(), testSpec(d)); err == nil || e.boxCount() != 0 {
		t.Errorf("Start with a refused attach: %v, %d boxes left", err, e.boxCount())
	}
}

// A slow engine: the call's deadline bounds the start, the error says the
// engine did not answer, and a caller's deadline is not taken for the
// engine's failure (no second try, no new check).
func TestStartOnASlowEngine(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	e.holdAll("create")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	infos := e.count("GET /info")
	_, err := d.Start(ctx, testSpec(d))
	var ee *sandbox.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "not reachable") {
		t.Fatalf("Start: %v", err)
	}
	if e.count("POST /containers/create") != 2 || e.count("GET /info") != infos { // one for runbox-init's volume
		t.Errorf("requests after the deadline: %v", e.requests())
	}
	if err := d.Ready(context.Background()); err != nil || e.count("GET /info") != infos {
		t.Errorf("Ready: %v; the engine was checked again after a caller's deadline", err)
	}
}

// A box the engine could not remove (away) is left to the reaper, which
// removes it once the engine answers.
func TestRemoveFailureIsReaped(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	b, _ := startBox(t, d, e, testSpec(d))
	e.failNext("remove", 500, "engine busy", 1)
	b.Remove()
	d.mu.Lock()
	left := d.unremoved[b.id]
	d.mu.Unlock()
	if !left || e.box(b.id) == nil {
		t.Fatalf("a failed removal: unremoved %v, on the engine %v", left, e.box(b.id) != nil)
	}
	n, err := d.Reap(context.Background(), nil)
	if err != nil || n < 1 || e.box(b.id) != nil || len(d.unremoved) != 0 {
		t.Errorf("Reap: %d %v; on the engine %v, unremoved %v", n, err, e.box(b.id) != nil, d.unremoved)
	}
}

// A pooled box starts at the least CPU weight and gets a cold box's when
// a job claims it; a cold box needs no claim.
func TestPooledBoxWeight(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	spec := testSpec(d)
	spec.Pooled = true
	b, fb := startBox(t, d, e, spec)
	defer b.Remove()
	if fb.req.HostConfig.CPUShares != pooledCPUShares {
		t.Errorf("pooled box CPU shares %d", fb.req.HostConfig.CPUShares)
	}
	if err := b.Claim(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := e.updates(fb); len(u) != 1 || u[0].CPUShares != claimedCPUShares {
		t.Errorf("claim updates %+v", u)
	}
	cold, cfb := startBox(t, d, e, testSpec(d))
	defer cold.Remove()
	if err := cold.Claim(context.Background()); err != nil || len(e.updates(cfb)) != 0 {
		t.Errorf("a cold box's claim: %v %+v", err, e.updates(cfb))
	}
	e.failNext("update", 500, "no update", 1)
	b.lowWeight = true
	if err := b.Claim(context.Background()); err == nil {
		t.Error("a refused update was not reported")
	}
}

// Image digests are asked once per image, and asked again after the
// engine changed; a missing image says so.
func TestImageDigest(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	img := d.m.Languages[0].Image
	for range 2 {
		if id, err := d.ImageDigest(context.Background(), img); err != nil || id != e.images[img] {
			t.Fatalf("ImageDigest: %s %v", id, err)
		}
	}
	if n := e.count("GET /images/" + img + "/json"); n != 1 {
		t.Errorf("inspected %d times", n)
	}
	d.invalidate(errors.New("changed"))
	_, _ = d.ImageDigest(context.Background(), img)
	if n := e.count("GET /images/" + img + "/json"); n != 2 {
		t.Errorf("after the engine changed: inspected %d times", n)
	}
	if _, err := d.ImageDigest(context.Background(), "runbox/sandbox:nope"); !isImageMissing(err) {
		t.Errorf("a missing image: %v", err)
	}
	e.failNext("image-inspect", 500, "boom", 1)
	var ee *sandbox.EngineError
	if _, err := d.ImageDigest(context.Background(), "other"); !errors.As(err, &ee) || isImageMissing(err) {
		t.Errorf("a failed inspect: %v", err)
	}
	info, err := d.Image(context.Background(), img)
	if err != nil || info.ID != e.images[img] || info.Labels["org.runbox.image"] != "x" {
		t.Errorf("Image: %+v %v", info, err)
	}
	if _, err := d.Image(context.Background(), "runbox/sandbox:nope"); !isImageMissing(err) {
		t.Errorf("Image of a missing one: %v", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
