package oci

import "testing"

// TestIsBoxID: only the ids newID makes name a box; an id from a record
// that would name another path or another runc container does not.
func TestIsBoxID(t *testing.T) {
	if id := newID(); !isBoxID(id) {
		t.Fatalf("newID %q", id)
	}
	for _, id := range []string{"", "runbox-", "runbox-0123456789abcde", "runbox-0123456789abcdefg", "runbox-0123456789abcdxz",
		"runbox-../../../etc", "../runbox-0123456789abcdef", "other-0123456789abcdef", "runbox-0123456789abcdef/.."} {
		if isBoxID(id) {
			t.Errorf("%q is taken for a box", id)
		}
	}
}
