//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// The run handle with the reference TypeScript SDK client at its default
// 60 s request timeout, over stdio on Docker: with answer_within_seconds
// 2, an ~8 s run answers running, then run_wait answers running and at
// last the result, shaped as a plain call's (the SDK checks it against the
// output schema); run_cancel stops a run and its box is gone. The audit
// log, and `runbox runs`, say how each background run ended.
func TestTypeScriptClientRunWait(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	m := writeManifest(t, fmt.Sprintf("audit:\n  enabled: true\n  path: %s\nlimits:\n  answer_within_seconds: 2\n", logPath)+imageLanguages(t))
	cmd := exec.Command("node", "runwait.mjs", runboxBin, m, "8")
	cmd.Dir = "ts"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts runwait: ") {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))

	entries, err := audit.Read(logPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	ended := map[string]int{}
	for _, e := range entries {
		ended[e.Background]++
	}
	// The plain call, the waited run and the cancelled one.
	if ended[""] != 1 || ended["waited"] != 1 || ended["cancelled"] != 1 {
		t.Fatalf("audit lines by background: %v", ended)
	}
	table, _ := runbox(t, "runs", "--manifest", m)
	if !strings.Contains(table, "BACKGROUND") || !strings.Contains(table, "waited") || !strings.Contains(table, "cancelled") {
		t.Fatalf("runbox runs:\n%s", table)
	}
}

// Over HTTP a run's handle belongs to its bearer token: another client's
// run_wait and run_cancel read it as unknown and leave it running. A
// flood of long runs past the caps (one per client, two on the server) is
// refused with resource_limit/background_runs, naming the cap, and leaves
// no box behind; /metrics counts the long runs.
func TestRunHandleOwnersAndCaps(t *testing.T) {
	tokens := map[string]string{"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef", "carol": "carol-token-0123456789abcdef"}
	y := "audit:\n  enabled: false\nlimits:\n  answer_within_seconds: 1\n  max_background_runs: 2\n  max_background_runs_per_client: 1\nhttp:\n  tokens:\n"
	for name, v := range tokens {
		env := "RBX_E2E_" + strings.ToUpper(name)
		t.Setenv(env, v)
		y += fmt.Sprintf("    - {name: %s, env: %s}\n", name, env)
	}
	s := startNetServer(t, "http", "--manifest", writeManifest(t, y+imageLanguages(t)))
	ca, cb, cc := tokenClient(t, s, tokens["alice"]), tokenClient(t, s, tokens["bob"]), tokenClient(t, s, tokens["carol"])
	long := map[string]any{"language": "python", "code": "import time\ntime.sleep(120)", "timeout_seconds": 300}

	var ids []string
	defer func() {
		for _, id := range ids {
			if left := waitNoBoxes(30*time.Second, "label="+sandbox.LabelRunID+"="+id); len(left) > 0 {
				t.Errorf("run %s left boxes %v", id, left)
			}
		}
	}()

	// alice floods: one run goes to the background, the others are
	// refused at the bound.
	const flood = 4
	results := make([]contract.Result, flood)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = callOn(t, ca, long) }()
	}
	wg.Wait()
	var aliceRun string
	for _, r := range results {
		ids = append(ids, r.RunID)
		switch {
		case r.Status == contract.StatusRunning && aliceRun == "":
			aliceRun = r.RunID
		case r.Error != nil && r.Error.Kind == contract.KindResourceLimit && r.Error.Limit == contract.LimitBackgroundRuns &&
			strings.Contains(r.Error.Message, "max_background_runs_per_client"):
		default:
			t.Fatalf("alice's flood: %+v", r)
		}
	}
	if aliceRun == "" {
		t.Fatalf("none of alice's runs went to the background: %+v", results)
	}
	bobs := callOn(t, cb, long)
	ids = append(ids, bobs.RunID)
	if bobs.Status != contract.StatusRunning {
		t.Fatalf("bob: %+v", bobs)
	}
	carols := callOn(t, cc, long)
	ids = append(ids, carols.RunID)
	if e := carols.Error; e == nil || e.Limit != contract.LimitBackgroundRuns || !strings.Contains(e.Message, "limits.max_background_runs)") {
		t.Fatalf("carol past the server's cap: %+v", carols)
	}

	// bob cannot see or stop alice's run.
	for _, tool := range []string{"run_wait", "run_cancel"} {
		r := handleCall(t, cb, tool, map[string]any{"run_id": aliceRun, "wait_seconds": 0})
		if r.Error == nil || r.Error.Kind != contract.KindInvalidRequest {
			t.Fatalf("bob's %s of alice's run: %+v", tool, r)
		}
	}
	if r := handleCall(t, ca, "run_wait", map[string]any{"run_id": aliceRun, "wait_seconds": 0}); r.Status != contract.StatusRunning {
		t.Fatalf("alice's run after bob's tries: %+v", r)
	}
	if got := scrape(t, s, tokens["alice"], "runbox_long_runs "); got != "runbox_long_runs 2" {
		t.Fatalf("metrics: %q", got)
	}
	for _, c := range []struct {
		c  *client.Client
		id string
	}{{ca, aliceRun}, {cb, bobs.RunID}} {
		if r := handleCall(t, c.c, "run_cancel", map[string]any{"run_id": c.id}); r.Error == nil || r.Error.Kind != contract.KindSandbox {
			t.Fatalf("run_cancel: %+v", r)
		}
	}
	if got := scrape(t, s, tokens["alice"], `runbox_background_runs_total{ended="cancelled"}`); got != `runbox_background_runs_total{ended="cancelled"} 2` {
		t.Fatalf("metrics: %q", got)
	}
}

func handleCall(t *testing.T, c *client.Client, tool string, args map[string]any) contract.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var r contract.Result
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// scrape returns the /metrics line that begins with prefix.
func scrape(t *testing.T, s *netServer, token, prefix string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
