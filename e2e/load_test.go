//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/client"

	"github.com/runbox-mcp/runbox/sandbox"
)

// loadCalls is how many calls each transport gets: a modest number in
// `make test`, RUNBOX_LOAD_CALLS=500 in `make stress`.
func loadCalls() int {
	if n, err := strconv.Atoi(os.Getenv("RUNBOX_LOAD_CALLS")); err == nil && n > 0 {
		return n
	}
	return 48
}

const loadConcurrency = 16

// TestLoad sends many calls at concurrency 16 over stdio and HTTP: every
// call is answered with its own output, no box is left, and the server's
// memory comes back to its idle level.
func TestLoad(t *testing.T) {
	n := loadCalls()
	t.Run("stdio", func(t *testing.T) {
		s := startServer(t, nil)
		defer s.close()
		loadOn(t, n, s.cmd.Process.Pid, []*client.Client{s.c})
	})
	t.Run("http", func(t *testing.T) {
		s := startNetServer(t, "http")
		clients := make([]*client.Client, 4)
		for i := range clients {
			clients[i] = s.client(t, "http")
		}
		loadOn(t, n, s.cmd.Process.Pid, clients)
	})
}

func loadOn(t *testing.T, n, pid int, clients []*client.Client) {
	t.Helper()
	call := func(c *client.Client, i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := c.CallTool(ctx, newCall(map[string]any{"language": "python", "code": fmt.Sprintf("print(%d * 2)", i)}))
		if err != nil {
			return err
		}
		r, err := decodeResult(res)
		if err != nil {
			return err
		}
		if r.Status != contract.StatusOK || r.Stdout != strconv.Itoa(i*2)+"\n" {
			return fmt.Errorf("call %d: status %s stdout %q error %+v", i, r.Status, r.Stdout, r.Error)
		}
		return nil
	}
	if err := call(clients[0], 0); err != nil { // warm: the server's idle level is after one run
		t.Fatal(err)
	}
	idle := rssKiB(t, pid)

	start := time.Now()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := range loadConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				errs <- call(clients[w%len(clients)], i)
			}
		}()
	}
	for i := 1; i <= n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			if failed <= 5 {
				t.Error(err)
			}
		}
	}
	took := time.Since(start)
	peak := rssKiB(t, pid)
	if failed > 0 {
		t.Fatalf("%d of %d calls failed", failed, n)
	}
	owner := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(pid)
	if left := waitNoBoxes(30*time.Second, owner); len(left) > 0 {
		t.Fatalf("boxes left after the load: %v", left)
	}
	// Memory back to idle: the Go runtime returns freed pages to the
	// system gradually.
	var after int
	deadline := time.Now().Add(60 * time.Second)
	for {
		after = rssKiB(t, pid)
		if after <= idle+loadRSSSlackKiB || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("%d calls at concurrency %d in %s (%.1f/s); RSS idle %d KiB, after the load %d KiB, then %d KiB", n, loadConcurrency, took.Round(time.Millisecond), float64(n)/took.Seconds(), idle, peak, after)
	if after > idle+loadRSSSlackKiB {
		t.Fatalf("server RSS %d KiB did not come back to its idle %d KiB (+%d)", after, idle, loadRSSSlackKiB)
	}
}

// loadRSSSlackKiB is how far above idle "back to idle" may be.
const loadRSSSlackKiB = 16 * 1024

func rssKiB(t *testing.T, pid int) int { return procStatusKiB(t, pid, "VmRSS") }

// procStatusKiB reads a field in kB of a process's /proc status (VmRSS,
// VmHWM).
func procStatusKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kib
		}
	}
	t.Fatal("no " + field)
	return 0
}
