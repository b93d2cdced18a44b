package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/sandbox"
)

type fakeSource struct{}

func (fakeSource) Stats() sandbox.Stats {
	return sandbox.Stats{Running: 2, Waiting: 5, Alive: 4, PoolIdle: map[string]int{"python": 1}}
}

func TestScrape(t *testing.T) {
	m := New("v1.2.3", "runc", fakeSource{})
	m.Observe(contract.Result{Language: "python", Status: contract.StatusOK, Metrics: contract.Metrics{WallMs: 40, Pooled: true}})
	m.Observe(contract.Result{Language: "bash", Status: contract.StatusError, Error: &contract.ErrorInfo{Kind: contract.KindTimeout}, Metrics: contract.Metrics{WallMs: 2000, QueueMs: 300}})
	var nilM *Metrics
	nilM.Observe(contract.Result{}) // no metrics: no-op

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`runbox_runs_total{error_kind="",language="python",status="ok"} 1`,
		`runbox_runs_total{error_kind="timeout",language="bash",status="error"} 1`,
		`runbox_run_duration_seconds_bucket{language="python",pooled="true",le="0.05"} 1`,
		`runbox_run_duration_seconds_count{language="bash",pooled="false"} 1`,
		`runbox_queue_depth 5`,
		`runbox_runs_in_progress 2`,
		`runbox_containers_alive 4`,
		`runbox_pool_idle_boxes{language="python"} 1`,
		`runbox_build_info{isolation="runc",version="v1.2.3"} 1`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %s", want)
		}
	}
}

type sessionFakeSource struct{ fakeSource }

func (sessionFakeSource) SessionStats() sandbox.SessionStats {
	return sandbox.SessionStats{Open: 2, Opened: 5, Lost: 1, Calls: 40}
}

func TestScrapeSessions(t *testing.T) {
	m := New("v1", "runc", sessionFakeSource{})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"runbox_sessions_open 2", "runbox_sessions_opened_total 5", "runbox_sessions_lost_total 1", "runbox_session_calls_total 40"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %s", want)
		}
	}
}
