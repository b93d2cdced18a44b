//go:build linux

package boxinit

import (
	"strings"
	"testing"
)

func TestCallNames(t *testing.T) {
	long := strings.Repeat("é", 200)
	for _, c := range []struct {
		head, op, server, tool string
	}{
		{`{"op":"call","server":"everything","tool":"echo","args":{"message":"xxxx`, "call", "everything", "echo"},
		{`{"op":"call","server":"a","tool":"b","args":{}}`, "call", "a", "b"},
		{`{"server":"a","op":"call","tool":"b"}`, "call", "a", "b"},
		{`{"op":"call","server":"a","tool":{"x":1},"args":{}}`, "call", "a", ""},
		{`{"op":"call","server":"` + long + `"`, "call", strings.ToValidUTF8(long[:maxNoteName], ""), ""},
		{`not json`, "", "", ""},
		{`{"op":"ca`, "", "", ""},
		{``, "", "", ""},
	} {
		op, server, tool := callNames([]byte(c.head))
		if op != c.op || server != c.server || tool != c.tool {
			t.Errorf("callNames(%.40q) = %q %q %q", c.head, op, server, tool)
		}
	}
}

func TestToolBudget(t *testing.T) {
	b := newToolBudget(2000)
	if got := b.request(); got != 2000-toolFraming {
		t.Fatalf("request() = %d", got)
	}
	if !b.take(500, false) || !b.take(500, false) || b.take(500, false) {
		t.Fatal("the budget let through more than it has")
	}
	if got := b.request(); got != 2000-3*toolFraming-1000 {
		t.Fatalf("request() after a call = %d", got)
	}
	if !b.take(100, true) {
		t.Fatal("a note found no room once the calls spent the budget")
	}
	if got := newToolBudget(0).request(); got != maxToolRequest {
		t.Fatalf("request() without a budget = %d", got)
	}
}
