//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// runbox runs a runbox command and returns its stdout and exit code.
func runbox(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(runboxBin, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestAuditRunsReplay: every call is one redacted line with who called;
// runbox runs lists them; replay re-runs a stored call and tells a match
// from a difference.
func TestAuditRunsReplay(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.jsonl")
	p := writeManifest(t, "audit:\n  path: "+logPath+"\n  store_code: true\n")
	s := startServer(t, []string{"RUNBOX_TEST_SECRET=" + fakeSecret}, "--manifest", p)
	leak := "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	ok, _ := s.call(t, map[string]any{"language": "python", "code": "import sys\nprint(sys.stdin.read().upper())\nprint('" + leak + "')\nopen('out.txt', 'w').write('x')\n", "stdin": "hello"})
	mustOK(t, ok)
	random, _ := s.call(t, map[string]any{"language": "python", "code": "import random\nprint(random.random())"})
	bad, _ := s.call(t, map[string]any{"language": "cobol", "code": "x"})
	s.close()

	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), fakeSecret) {
		t.Fatal("the server's secret reached the log")
	}
	out, code := runbox(t, "runs", "--manifest", p, "--json")
	if code != 0 {
		t.Fatalf("runs: exit %d", code)
	}
	var entries []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("runs --json: %v: %s", err, line)
		}
		entries = append(entries, e)
	}
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3:\n%s", len(entries), out)
	}
	first := entries[0]
	client := first["client"].(map[string]any)
	if first["run_id"] != ok.RunID || client["name"] != "runbox-e2e" || first["transport"] != "stdio" || first["language"] != "python" ||
		first["status"] != "ok" || len(first["code_sha256"].(string)) != 64 || first["image"] == "" {
		t.Errorf("entry: %v", first)
	}
	if head := first["stdout_head"].(string); !strings.HasPrefix(head, "HELLO\n") || strings.Contains(head, "wJalrXUtnFEMI") || !strings.Contains(head, "[REDACTED]") {
		t.Errorf("stdout head not redacted: %q", head)
	}
	if arts := first["artifacts"].([]any); len(arts) != 1 || arts[0].(map[string]any)["path"] != "out.txt" {
		t.Errorf("artifacts: %v", arts)
	}
	if e := entries[2]["error"].(map[string]any); e["kind"] != string(contract.KindInvalidRequest) || entries[2]["run_id"] != bad.RunID {
		t.Errorf("invalid request entry: %v", entries[2])
	}
	table, _ := runbox(t, "runs", "--manifest", p)
	if !strings.Contains(table, ok.RunID) || !strings.Contains(table, "runbox-e2e") || !strings.Contains(table, "invalid_request") {
		t.Errorf("runs table:\n%s", table)
	}

	out, code = runbox(t, "replay", "--manifest", p, ok.RunID)
	if code != 0 || !strings.Contains(out, "match:") {
		t.Errorf("replay of a deterministic run: exit %d\n%s", code, out)
	}
	out, code = runbox(t, "replay", "--manifest", p, random.RunID)
	if code != 1 || !strings.Contains(out, "differs: stdout") {
		t.Errorf("replay of a random run: exit %d\n%s", code, out)
	}

	// Without store_code there is nothing to replay, and the error says why.
	p2 := writeManifest(t, "audit:\n  path: "+filepath.Join(dir, "hashes-only.jsonl")+"\n")
	s2 := startServer(t, nil, "--manifest", p2)
	r, _ := s2.call(t, map[string]any{"language": "bash", "code": "echo hi"})
	s2.close()
	cmd := exec.Command(runboxBin, "replay", "--manifest", p2, r.RunID)
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "store_code") {
		t.Errorf("replay without stored code: %v\n%s", err, msg)
	}
}

// TestMetricsEndpoint: /metrics on its own address (no token), and on the
// MCP listener behind the token otherwise.
func TestMetricsEndpoint(t *testing.T) {
	maddr := freeAddr(t)
	s := startNetServer(t, "http", "--manifest", writeManifest(t, "metrics:\n  listen: "+maddr+"\n"))
	c := s.client(t, "http")
	mustOK(t, callOn(t, c, map[string]any{"language": "python", "code": "print(1)"}))
	callOn(t, c, map[string]any{"language": "python", "code": "1/0"})
	body := get(t, "http://"+maddr+"/metrics", "", http.StatusOK)
	for _, want := range []string{
		`runbox_runs_total{error_kind="",language="python",status="ok"} 1`,
		`runbox_runs_total{error_kind="runtime",language="python",status="error"} 1`,
		`runbox_run_duration_seconds_count{language="python",pooled="false"} 2`,
		"runbox_queue_depth 0", "runbox_runs_in_progress 0", "runbox_containers_alive ", `runbox_build_info{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	get(t, "http://"+s.addr+"/metrics", testToken, http.StatusNotFound)

	s2 := startNetServer(t, "http")
	get(t, "http://"+s2.addr+"/metrics", "", http.StatusUnauthorized)
	if body := get(t, "http://"+s2.addr+"/metrics", testToken, http.StatusOK); !strings.Contains(body, "runbox_build_info") {
		t.Error("metrics on the MCP listener")
	}
}

func get(t *testing.T, url, token string, want int) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, want)
	}
	return string(b)
}
