package docker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/runbox-mcp/runbox/sandbox"
)

// The reaper leaves a live session's box, including one another server
// is still starting, and takes those that ended, expired or never started.
func TestKeepSessionBox(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	session := func(expires time.Time) map[string]string {
		return map[string]string{sandbox.LabelSession: "k", sandbox.LabelSessionExpires: strconv.FormatInt(expires.Unix(), 10)}
	}
	later, earlier := now.Add(time.Hour), now.Add(-time.Minute)
	for _, c := range []struct {
		name            string
		labels          map[string]string
		state           container.ContainerState
		age             time.Duration
		session, wanted bool
	}{
		{"not a session", map[string]string{}, "running", 0, false, false},
		{"running", session(later), "running", time.Hour, true, true},
		{"being started by its server", session(later), "created", time.Second, true, true},
		{"created long ago: a failed start", session(later), "created", 10 * time.Minute, true, false},
		{"its box ended", session(later), "exited", time.Minute, true, false},
		{"dead", session(later), "dead", time.Minute, true, false},
		{"past its lifetime", session(earlier), "running", time.Hour, true, false},
		{"a broken expiry label", map[string]string{sandbox.LabelSession: "k", sandbox.LabelSessionExpires: "soon"}, "running", 0, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			isSession, keep := keepSessionBox(c.labels, c.state, now.Add(-c.age), now)
			if isSession != c.session || keep != c.wanted {
				t.Fatalf("keepSessionBox = %v, %v; want %v, %v", isSession, keep, c.session, c.wanted)
			}
		})
	}
}

// The reaper takes the boxes of a dead server but those a store keeps a
// run's record of (Options.Keep): a restarted server adopts them.
func TestReapHonoursKeep(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	// The reap Ready starts must be over before the dead server's boxes
	// exist: it would take both.
	waitFor(t, "Ready's reap", func() bool { return e.count("GET /containers/json") > 0 })
	time.Sleep(300 * time.Millisecond)
	dead := d.owner
	dead.Instance, dead.PID, dead.Start = "dead", 1<<30, "1"
	spec := testSpec(d)
	spec.Labels = dead.Labels(map[string]string{sandbox.LabelRunID: "r_kept"})
	kept, _ := startBox(t, d, e, spec)
	spec.Labels = dead.Labels(map[string]string{sandbox.LabelRunID: "r_left"})
	left, _ := startBox(t, d, e, spec)
	n, err := d.Reap(context.Background(), func(id string) bool { return id == kept.id })
	if err != nil || n != 1 || e.box(left.id) != nil || e.box(kept.id) == nil {
		t.Fatalf("Reap: %d %v; the left box on the engine %v, the kept one %v", n, err, e.box(left.id) != nil, e.box(kept.id) != nil)
	}
	if n, _ := d.Reap(context.Background(), nil); n != 1 || e.box(kept.id) != nil {
		t.Fatalf("without its record the kept box is not reaped: %d", n)
	}
}

// A box marked kept by another state directory's store (MarkKept) stays
// when its server dies, until its age passes any run's; a box of this
// server's own state directory, or an unmarked one, goes at once.
func TestReapLeavesAnotherStateDirsKeptBox(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	d.owner.State = sandbox.StateKey(t.TempDir())
	waitFor(t, "Ready's reap", func() bool { return e.count("GET /containers/json") > 0 })
	time.Sleep(300 * time.Millisecond)
	dead := d.owner
	dead.Instance, dead.PID, dead.Start = "dead", 1<<30, "1"
	otherState := sandbox.StateKey(t.TempDir())
	spec := testSpec(d)
	spec.Labels = dead.Labels(nil)
	elsewhere, _ := startBox(t, d, e, spec)
	ours, _ := startBox(t, d, e, spec)
	old, _ := startBox(t, d, e, spec)
	unmarked, _ := startBox(t, d, e, spec)
	for _, m := range []struct {
		state string
		b     *box
	}{{otherState, elsewhere}, {d.owner.State, ours}, {otherState, old}} {
		if err := d.markKept(context.Background(), m.b.id, m.state); err != nil {
			t.Fatal(err)
		}
	}
	if got := keptState([]string{"/" + e.box(elsewhere.id).name}); got != otherState {
		t.Fatalf("the kept box's name %q reads as state %q", e.box(elsewhere.id).name, got)
	}
	ob := e.box(old.id)
	e.mu.Lock()
	ob.created = time.Now().Add(-48 * time.Hour)
	e.mu.Unlock()
	n, err := d.Reap(context.Background(), nil)
	if err != nil || n != 3 || e.box(elsewhere.id) == nil || e.box(ours.id) != nil || e.box(old.id) != nil || e.box(unmarked.id) != nil {
		t.Fatalf("Reap: %d %v; left: another state directory's %v, ours %v, an old one %v, an unmarked one %v", n, err,
			e.box(elsewhere.id) != nil, e.box(ours.id) != nil, e.box(old.id) != nil, e.box(unmarked.id) != nil)
	}
	if err := d.markKept(context.Background(), elsewhere.id, ""); err != nil || keptState([]string{"/" + e.box(elsewhere.id).name}) != otherState {
		t.Fatalf("a server without a store marked a box: %v", err)
	}
}

func TestKeptState(t *testing.T) {
	for names, want := range map[string]string{
		"/runbox-kept-0123abcd-0123456789ab": "0123abcd",
		"/friendly_name":                     "",
		"/runbox-kept-nodash":                "",
		"":                                   "",
	} {
		if got := keptState(strings.Split(names, ",")); got != want {
			t.Errorf("keptState(%q) = %q, want %q", names, got, want)
		}
	}
	if n := keptName("0123abcd", strings.Repeat("f", 64)); n != "runbox-kept-0123abcd-ffffffffffff" || keptState([]string{n}) != "0123abcd" {
		t.Errorf("keptName = %q", n)
	}
}

// A box gone before its mark (a short task's run ended first) needs none:
// no error, so no warning in the log.
func TestMarkKeptOfAGoneBox(t *testing.T) {
	e := newFakeEngine(t)
	d := newDocker(t, e, nil)
	if err := d.markKept(context.Background(), strings.Repeat("a", 64), sandbox.StateKey(t.TempDir())); err != nil {
		t.Fatalf("marking a gone box: %v", err)
	}
}
