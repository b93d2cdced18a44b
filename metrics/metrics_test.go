package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	m.ObserveToolCall("memory", "ok", 3*time.Millisecond)
	m.ObserveToolCall("memory", "limit", 0)
	m.Observe(contract.Result{Language: "python", Status: contract.StatusError, Error: &contract.ErrorInfo{Kind: contract.KindForbiddenNetwork}, Network: []contract.Connection{
		{Host: "a.example", Allowed: true, Address: "1.2.3.4:443", BytesOut: 100, BytesIn: 5000},
		{Host: "b.example", Allowed: true, Address: "1.2.3.5:443", BytesOut: 10, BytesIn: 20, Cut: contract.CutBytes},
		{Host: "c.example"},
		{Host: "d.example", Allowed: true},
	}})
	var nilM *Metrics
	nilM.Observe(contract.Result{}) // no metrics: no-op
	nilM.ObserveToolCall("x", "ok", 0)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`runbox_runs_total{error_kind="",language="python",status="ok"} 1`,
		`runbox_runs_total{error_kind="timeout",language="bash",status="error"} 1`,
		`runbox_run_duration_seconds_bucket{language="python",pooled="true",le="0.05"} 1`,
		`runbox_run_duration_seconds_count{language="bash",pooled="false"} 1`,
		`runbox_queue_depth 5`,
		`runbox_tool_calls_total{outcome="ok",server="memory"} 1`,
		`runbox_tool_calls_total{outcome="limit",server="memory"} 1`,
		`runbox_tool_call_duration_seconds_bucket{server="memory",le="0.005"} 2`,
		`runbox_runs_in_progress 2`,
		`runbox_containers_alive 4`,
		`runbox_pool_idle_boxes{language="python"} 1`,
		`runbox_build_info{isolation="runc",version="v1.2.3"} 1`,
		`process_resident_memory_bytes`,
		`runbox_runs_total{error_kind="forbidden_network",language="python",status="error"} 1`,
		`runbox_network_connections_total{outcome="allowed"} 1`,
		`runbox_network_connections_total{outcome="cut"} 1`,
		`runbox_network_connections_total{outcome="denied"} 1`,
		`runbox_network_connections_total{outcome="failed"} 1`,
		`runbox_network_bytes_total{direction="in"} 5020`,
		`runbox_network_bytes_total{direction="out"} 110`,
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

type exposureFake struct{}

func (exposureFake) ExposureCounts() (int, int, int) { return 2, 7, 5 }

func TestScrapeExposures(t *testing.T) {
	m := New("v1", "runc", nil)
	m.WatchExposures(exposureFake{})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"runbox_exposures_open 2", "runbox_exposure_connections_open 7", "runbox_exposure_streams_open 5"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %s", want)
		}
	}
}
