package sandbox

import "testing"

// A state directory names itself the same however its path is written; a
// kept box is elsewhere's when another directory, or a server without a
// store, judges it.
func TestStateKeyAndKeptElsewhere(t *testing.T) {
	if StateKey("/a/b") != StateKey("/a/b/") || StateKey("/a/b") != StateKey("/a/./b") || StateKey("/a/b") == StateKey("/a/c") {
		t.Error("StateKey does not name a directory")
	}
	self := CurrentOwner()
	self.State = StateKey("/a/b")
	noStore := self
	noStore.State = ""
	for _, c := range []struct {
		name  string
		state string
		self  Owner
		want  bool
	}{
		{"not marked", "", self, false},
		{"marked by this directory", StateKey("/a/b"), self, false},
		{"marked by another directory", StateKey("/a/c"), self, true},
		{"judged by a server without a store", StateKey("/a/b"), noStore, true},
	} {
		if got := KeptElsewhere(c.state, c.self); got != c.want {
			t.Errorf("%s: KeptElsewhere = %v, want %v", c.name, got, c.want)
		}
	}
}
