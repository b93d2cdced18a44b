//go:build linux

package boxinit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/runbox-mcp/runbox/internal/initproto"
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
	if !b.take(500, false) || !b.take(1500, false) || b.take(1, false) {
		t.Fatal("the budget let through more than it has")
	}
	b.give(500)
	if !b.take(500, false) {
		t.Fatal("what was given back cannot be taken again")
	}
	if !b.take(100, true) {
		t.Fatal("a note found no room once the calls spent the budget")
	}
	for _, c := range []struct {
		budget, size int64
		over         bool
	}{
		{1 << 20, 1000, false},
		{1 << 20, 1 << 20, true},
		{1 << 20, 5 << 20, true},
		{100, 10, true},
		{0, 1 << 20, false},
	} {
		b := newToolBudget(c.budget)
		req := `{"op":"call","server":"s","tool":"t","args":"` + strings.Repeat("x", int(c.size)) + `"}`
		head, size, over, err := readRequest(strings.NewReader(req), b)
		if err != nil || size != int64(len(req)) || over != c.over {
			t.Fatalf("budget %d, %d bytes: size %d, over %v, err %v", c.budget, len(req), size, over, err)
		}
		if over {
			if len(head) > maxNoteHead || !strings.HasPrefix(req, string(head)) {
				t.Fatalf("the head kept of a refused request: %d bytes", len(head))
			}
			if _, server, tool := callNames(head); server != "s" || tool != "t" {
				t.Fatalf("names from the head: %q %q", server, tool)
			}
			if c.budget > toolFraming && !b.take(c.budget, false) {
				t.Fatal("a refused request kept some of the budget")
			}
		} else if string(head) != req {
			t.Fatal("the request read is not the one sent")
		}
	}
}

// A request past the job's budget never reaches the host: the code's send
// completes, the host gets a note of its names and size, and the code its
// answer; a request within the budget goes as before.
func TestToolCallsBudget(t *testing.T) {
	host, server := hostPair(t)
	var mu sync.Mutex
	var seen []int
	answerStreams(server, func(h initproto.Header, blobs [][]byte) []byte {
		var note struct {
			RefusedBytes int64 `json:"refused_bytes"`
		}
		_ = json.Unmarshal(h.Data, &note)
		mu.Lock()
		seen = append(seen, len(blobs[0]))
		mu.Unlock()
		return []byte(fmt.Sprintf("%d:%s", note.RefusedBytes, blobs[0]))
	})
	sock := filepath.Join(t.TempDir(), "tools.sock")
	svc := toolCalls{socket: sock, lib: filepath.Join(t.TempDir(), "lib")}
	stop, err := svc.Start(context.Background(), host, &initproto.Job{Streams: []string{initproto.StreamTool},
		StreamBudgets: map[string]int64{initproto.StreamTool: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	call := func(req string) string {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Written whole before any answer is read: a refusal must read it
		// to its end, not break the code's send.
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatalf("sending: %v", err)
		}
		_ = c.(*net.UnixConn).CloseWrite()
		got, _ := io.ReadAll(c)
		return string(got)
	}
	big := `{"op":"call","server":"s","tool":"t","args":{"x":"` + strings.Repeat("x", 1<<20) + `"}}`
	if got, want := call(big), fmt.Sprintf(`%d:{"op":"call","server":"s","tool":"t"}`, len(big)); got != want {
		t.Fatalf("too large: %q, want %q", got, want)
	}
	small := `{"op":"call","server":"s","tool":"t","args":{}}`
	if got := call(small); got != "0:"+small {
		t.Fatalf("within the budget: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range seen {
		if n > 64<<10 {
			t.Fatalf("a request of %d bytes reached the host", n)
		}
	}
}
