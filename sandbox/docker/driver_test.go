package docker

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Ready fills runbox-init's volume once, through a helper container that
// is never started and is removed; a second server finds the filled
// volume by its label and makes nothing.
func TestReadyFillsTheInitVolume(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	if !strings.HasPrefix(d.initVolume, "runbox-init-") {
		t.Fatalf("init volume %q", d.initVolume)
	}
	if len(e.created) != 1 {
		t.Fatalf("%d containers created, want the one helper", len(e.created))
	}
	helper := e.created[0]
	if got := string(helper.files[sandbox.InitDir+"/runbox-init"]); got != "#!runbox-init\n" {
		t.Errorf("runbox-init copied as %q", got)
	}
	if e.box(helper.id) != nil || e.count("POST /containers/"+helper.id+"/start") != 0 {
		t.Error("the helper container was started or left")
	}
	if !helper.req.NetworkDisabled || helper.req.HostConfig.NetworkMode != "none" {
		t.Errorf("helper %+v", helper.req.Config)
	}
	e.mu.Lock()
	v := e.volumes[d.initVolume]
	e.mu.Unlock()
	if v.Labels[sandbox.LabelInitSHA] == "" || v.Labels[sandbox.LabelManaged] != "true" {
		t.Errorf("volume labels %v", v.Labels)
	}
	d2 := newDocker(t, e, nil)
	if d2.initVolume != d.initVolume || len(e.created) != 1 {
		t.Errorf("a second server made its own: %s, %d containers created", d2.initVolume, len(e.created))
	}
}

// A volume of runbox-init's name that the engine made empty (a box's
// mount after a prune) is replaced by a filled one.
func TestReadyReplacesAnEmptyInitVolume(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	name := d.initVolume
	e.mu.Lock()
	e.volumes[name] = volumeWithLabels(name, nil)
	e.mu.Unlock()
	d.invalidate(errors.New("changed"))
	if err := d.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	v := e.volumes[name]
	e.mu.Unlock()
	if v.Labels[sandbox.LabelInitSHA] == "" || len(e.created) != 2 || e.count("DELETE /volumes/"+name) != 1 {
		t.Errorf("the empty volume was not replaced: labels %v, %d helpers", v.Labels, len(e.created))
	}
}

// Ready refuses an engine that cannot run the boxes as asked, with the
// fix: gVisor without runsc, Podman whose default runtime is another.
func TestReadyRefusals(t *testing.T) {
	gvisor := func(m *manifest.Manifest) { m.Isolation = manifest.IsolationGVisor }
	e := newFakeEngine(t)
	t.Setenv("DOCKER_HOST", e.host())
	for _, c := range []struct {
		name   string
		podman bool
		want   string
	}{
		{"gvisor without runsc", false, "no runsc runtime"},
		{"podman under gvisor", true, "default runtime is runc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.mu.Lock()
			e.podman, e.runsc = c.podman, c.podman
			e.mu.Unlock()
			m := manifest.Default()
			gvisor(m)
			d, err := New(Options{Manifest: m, InitDir: t.TempDir()}, sandbox.CurrentOwner())
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var ee *sandbox.EngineError
			if err := d.Ready(context.Background()); !errors.As(err, &ee) || !strings.Contains(ee.Msg, c.want) || ee.Hint == "" {
				t.Errorf("Ready: %v, want %q", err, c.want)
			}
		})
	}
	// No runbox-init beside the server: the fix is to build it.
	e.mu.Lock()
	e.podman, e.runsc = false, false
	e.mu.Unlock()
	d, err := New(Options{Manifest: manifest.Default(), InitDir: t.TempDir()}, sandbox.CurrentOwner())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var ee *sandbox.EngineError
	if err := d.Ready(context.Background()); !errors.As(err, &ee) || !strings.Contains(ee.Hint, "make build") {
		t.Errorf("Ready without runbox-init: %v", err)
	}
	// An engine that is away.
	e.failNext("info", 500, "daemon is shutting down", 1)
	if err := d.Ready(context.Background()); !errors.As(err, &ee) || !strings.Contains(ee.Msg, "daemon is shutting down") {
		t.Errorf("Ready on an engine that fails: %v", err)
	}
}

// Under gVisor on Docker the box runs under runsc, without a pids limit
// (runsc refuses one; runbox-init sets RLIMIT_NPROC), and is never
// reweighed.
func TestStartUnderGVisor(t *testing.T) {
	e := newFakeEngine(t)
	e.runsc = true
	d := newDocker(t, e, func(m *manifest.Manifest) { m.Isolation = manifest.IsolationGVisor })
	spec := testSpec(d)
	spec.Pooled = true
	b, fb := startBox(t, d, e, spec)
	defer b.Remove()
	h := fb.req.HostConfig
	if h.Runtime != "runsc" || h.PidsLimit != nil || h.CPUShares != 0 || b.lowWeight {
		t.Errorf("gvisor box: runtime %s pids %v shares %d", h.Runtime, h.PidsLimit, h.CPUShares)
	}
	if d.Isolation() != manifest.IsolationGVisor {
		t.Errorf("isolation %s", d.Isolation())
	}
}

// A box's folders (a client's roots) reach it as this server's volumes
// of the local driver that bind them nosuid, nodev, noexec, read-only;
// the volumes go at Close.
func TestStartWithFolders(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	spec := testSpec(d)
	spec.Mounts = []sandbox.HostMount{{Source: "/srv/data", Target: "/mnt/roots/data"}}
	b, fb := startBox(t, d, e, spec)
	var m mount.Mount
	for _, mt := range fb.req.HostConfig.Mounts {
		if mt.Target == "/mnt/roots/data" {
			m = mt
		}
	}
	if m.Type != mount.TypeVolume || m.Source != d.folderVolumeName("/srv/data") {
		t.Fatalf("folder mount %+v", m)
	}
	e.mu.Lock()
	v, ok := e.volumes[m.Source]
	e.mu.Unlock()
	if !ok || v.Options["device"] != "/srv/data" || v.Options["type"] != "none" || v.Options["o"] != "bind,ro,nosuid,nodev,noexec,private" ||
		v.Labels[sandbox.LabelFolder] != "/srv/data" || v.Labels[sandbox.LabelInstance] != d.owner.Instance {
		t.Errorf("folder volume %+v", v)
	}
	b.Remove()
	d.Close()
	e.mu.Lock()
	_, ok = e.volumes[m.Source]
	e.mu.Unlock()
	if ok {
		t.Error("the folder volume outlived its server's Close")
	}
	// A folder volume the engine refuses fails the start, and leaves no box.
	d = newDocker(t, e, nil)
	e.failNext("volume-create", 500, "no such device", -1)
	if _, err := d.Start(context.Background(), spec); err == nil || e.boxCount() != 0 {
		t.Errorf("Start with a refused folder volume: %v, %d boxes", err, e.boxCount())
	}
}

// On Podman: the profile in its forms (the seccomp profile by path, the
// folders as Binds), no reweighing, and a removal retried while Podman
// says the box's state is improper.
func TestStartOnPodman(t *testing.T) {
	e := newFakeEngine(t)
	e.podman = true
	d := newDocker(t, e, nil)
	spec := testSpec(d)
	spec.Pooled = true
	spec.Mounts = []sandbox.HostMount{{Source: "/srv/data", Target: "/mnt/roots/data"}}
	b, fb := startBox(t, d, e, spec)
	h := fb.req.HostConfig
	if !strings.HasPrefix(h.SecurityOpt[1], "seccomp=/") || !slices.Contains(h.Binds, "/srv/data:/mnt/roots/data:ro,nosuid,nodev,noexec,bind,rprivate") ||
		h.CPUShares != 0 || b.lowWeight {
		t.Errorf("podman box: security %.80q binds %v shares %d", h.SecurityOpt, h.Binds, h.CPUShares)
	}
	e.failNext("remove", 500, "container state improper: stopped", 2)
	b.Remove()
	if e.box(b.id) != nil || len(d.unremoved) != 0 {
		t.Errorf("the removal was not retried: on the engine %v, unremoved %v", e.box(b.id) != nil, d.unremoved)
	}
	eng, err := d.Engine(context.Background())
	if err != nil || eng.Product != "Podman" || eng.RuncVersion != "1.1.5+ds1-1+deb12u1" {
		t.Errorf("Engine on Podman: %+v %v", eng, err)
	}
	spec.Mounts = []sandbox.HostMount{{Source: "/srv/a:b", Target: "/mnt/roots/ab"}}
	if _, err := d.Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "':'") {
		t.Errorf("a folder Podman cannot mount: %v", err)
	}
}

// Engine describes the engine for doctor: its versions, the negotiated
// API version, the cgroup, the runtimes.
func TestEngineDescription(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	eng, err := d.Engine(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if eng.Product != "Docker" || eng.Version != "20.10.24" || eng.APIVersion != "1.41" || eng.Arch != "x86_64" ||
		eng.CgroupVersion != "2" || eng.Runtimes["runc"] != "runc" || eng.RuncVersion != "v1.1.5" {
		t.Errorf("engine %+v", eng)
	}
	e.failNext("info", 500, "boom", 1)
	if _, err := d.Engine(context.Background()); err == nil {
		t.Error("a failed /info was not reported")
	}
}

// Sessions find their running boxes by label and attach to them again:
// the attach stream again, and the box's end waited for while it runs.
func TestFindAndAttachSessionBoxes(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	spec := testSpec(d)
	spec.Session = true
	spec.Labels["io.runbox.session"] = "s1"
	// A session box says when it ends: without it, the reap Ready started
	// would take the box for an expired session's.
	spec.Labels[sandbox.LabelSessionExpires] = strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	b, _ := startBox(t, d, e, spec)
	defer b.Remove()
	other, _ := startBox(t, d, e, testSpec(d))
	defer other.Remove()
	found, err := d.FindBoxes(context.Background(), map[string]string{"io.runbox.session": ""})
	if err != nil || len(found) != 1 || found[0].ID != b.id || found[0].Labels["io.runbox.session"] != "s1" {
		t.Fatalf("FindBoxes: %+v %v", found, err)
	}
	if found, _ := d.FindBoxes(context.Background(), map[string]string{"io.runbox.session": "s2"}); len(found) != 0 {
		t.Errorf("FindBoxes s2: %+v", found)
	}
	// A restarted server: the old stream is gone.
	b.att.Close()
	again, err := d.Attach(context.Background(), b.id)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := again.Exchange(context.Background())
	defer c.Close()
	if _, err := c.Write([]byte("cell")); err != nil {
		t.Fatal(err)
	}
	if got := e.box(b.id); got == nil || got.hear(t, 4) != "cell" {
		t.Error("the second attach does not reach the box's stdin")
	}
	if !again.Alive() {
		t.Error("an attached running box is not alive")
	}
	e.exit(b.id, 0, false)
	waitFor(t, "the attached box is seen ended", func() bool { return !again.Alive() })
	if _, err := d.Attach(context.Background(), "gone"); err == nil {
		t.Error("attaching to a box that is gone succeeded")
	}
	e.failNext("list", 500, "boom", 1)
	if _, err := d.FindBoxes(context.Background(), nil); err == nil {
		t.Error("a failed list was not reported")
	}
}
