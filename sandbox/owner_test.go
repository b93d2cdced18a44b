package sandbox

import (
	"os"
	"strconv"
	"testing"
)

// OwnerAlive judges a box of this host by its owner process; a dead
// owner's box whose runs another state directory keeps is left to its age
// (a server restarted on that directory may adopt it), as another host's.
func TestOwnerAlive(t *testing.T) {
	self := CurrentOwner()
	self.State = StateKey(t.TempDir())
	other := StateKey(t.TempDir())
	live := self
	live.Instance = "another"
	dead := live
	dead.PID, dead.Start = os.Getpid(), "1" // this pid, another start: a reused pid
	withState := func(o Owner, state string) map[string]string {
		o.State = state
		return o.Labels(nil)
	}
	elsewhere := live
	elsewhere.Host = self.Host + "-elsewhere"
	for _, c := range []struct {
		name         string
		labels       map[string]string
		alive, known bool
	}{
		{"this server", self.Labels(nil), true, true},
		{"a live server of this host", withState(live, other), true, true},
		{"a dead owner that kept no runs", withState(dead, ""), false, true},
		{"a dead owner of this state directory", withState(dead, self.State), false, true},
		{"a dead owner of another state directory", withState(dead, other), false, false},
		{"another host's", elsewhere.Labels(nil), false, false},
		{"a pid that is no number", map[string]string{LabelOwnerHost: self.Host, LabelOwnerPID: "x"}, false, true},
	} {
		if alive, known := OwnerAlive(c.labels, self); alive != c.alive || known != c.known {
			t.Errorf("%s: alive %v known %v, want %v %v", c.name, alive, known, c.alive, c.known)
		}
	}
	noStore := self
	noStore.State = ""
	if _, known := OwnerAlive(withState(dead, other), noStore); known {
		t.Error("a server without a store judged a box another state directory keeps")
	}
	if l := withState(dead, ""); l[LabelOwnerState] != "" || l[LabelOwnerPID] != strconv.Itoa(os.Getpid()) {
		t.Errorf("labels %v", l)
	}
	if StateKey("/a/b") != StateKey("/a/b/") || StateKey("/a/b") == StateKey("/a/c") {
		t.Error("StateKey does not name a directory")
	}
}
