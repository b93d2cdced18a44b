package metrics

import (
	"net/http"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runbox-mcp/runbox/sandbox"
)

// Source reports the runner's state at scrape time.
type Source interface {
	Stats() sandbox.Stats
}

// Metrics holds the registry and the run counters.
type Metrics struct {
	reg     *prometheus.Registry
	runs    *prometheus.CounterVec
	latency *prometheus.HistogramVec
	queue   *prometheus.HistogramVec
	// toolCalls and toolSeconds count the code's upstream tool calls.
	toolCalls   *prometheus.CounterVec
	toolSeconds *prometheus.HistogramVec
	conns       *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	// background counts runs that went on after their call answered, by
	// how they ended; longRuns is the long runs held now.
	background *prometheus.CounterVec
	longRuns   prometheus.Gauge
	// refused counts what the HTTP listener refused, by reason.
	refused *prometheus.CounterVec
}

// New registers every metric; src may be nil (no runner gauges).
func New(version, isolation string, src Source) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbox_runs_total",
			Help: "Runs answered, by language, status (ok, error) and error kind (empty when ok).",
		}, []string{"language", "status", "error_kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runbox_run_duration_seconds",
			Help:    "Time from a call's arrival to its answer, by language and whether a pooled box served it.",
			Buckets: []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"language", "pooled"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runbox_queue_wait_seconds",
			Help:    "Time calls waited for a slot.",
			Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 30, 120},
		}, []string{"language"}),
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbox_network_connections_total",
			Help: "Connections programs made or tried through the proxy, by outcome: allowed, denied (the policy refused it), failed (allowed, but the destination did not answer), cut (a byte or time cap ended it).",
		}, []string{"outcome"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runbox_network_bytes_total",
			Help: "Bytes carried through the proxy, by direction: out (from programs), in (to programs).",
		}, []string{"direction"}),
	}
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runbox_tool_calls_total",
		Help: "Calls of the code to upstream tools, by server and outcome (ok or the error kind the code saw).",
	}, []string{"server", "outcome"})
	m.toolSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "runbox_tool_call_duration_seconds",
		Help:    "Time of the code's calls to upstream tools, by server.",
		Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120},
	}, []string{"server"})
	reg.MustRegister(m.toolCalls, m.toolSeconds)
	m.background = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runbox_background_runs_total",
		Help: "Runs that went on in the background after their call answered running (limits.answer_within_seconds), by how they ended: waited (collected with run_wait), cancelled (run_cancel), abandoned (never collected).",
	}, []string{"ended"})
	m.longRuns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "runbox_long_runs",
		Help: "Long runs held now: background runs still going and calls made as MCP tasks (capped by limits.max_background_runs).",
	})
	reg.MustRegister(m.background, m.longRuns)
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runbox_http_refused_total",
		Help: "Connections and requests the HTTP listener refused, by reason: unauthorized (no valid token), body_too_large (past http.max_request_bytes), body_unread (the body did not come in time or broke off), connections_per_address, unauthenticated_connections (the caps on open connections).",
	}, []string{"reason"})
	reg.MustRegister(m.refused)
	reg.MustRegister(m.runs, m.latency, m.queue, m.conns, m.bytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "runbox_build_info", Help: "Always 1; labels say the version and isolation level.",
		ConstLabels: prometheus.Labels{"version": version, "isolation": isolation}})
	info.Set(1)
	reg.MustRegister(info)
	if src != nil {
		reg.MustRegister(stateCollector{src})
	}
	return m
}

// Observe counts a run's result.
func (m *Metrics) Observe(res contract.Result) {
	if m == nil {
		return
	}
	kind := ""
	if res.Error != nil {
		kind = string(res.Error.Kind)
	}
	lang := res.Language
	m.runs.WithLabelValues(lang, string(res.Status), kind).Inc()
	pooled := "false"
	if res.Metrics.Pooled {
		pooled = "true"
	}
	total := float64(res.Metrics.QueueMs+res.Metrics.StartupMs+res.Metrics.WallMs) / 1000
	m.latency.WithLabelValues(lang, pooled).Observe(total)
	m.queue.WithLabelValues(lang).Observe(float64(res.Metrics.QueueMs) / 1000)
	for _, c := range res.Network {
		outcome := "allowed"
		switch {
		case !c.Allowed:
			outcome = "denied"
		case c.Cut != "":
			outcome = "cut"
		case c.Address == "":
			outcome = "failed"
		}
		m.conns.WithLabelValues(outcome).Inc()
		m.bytes.WithLabelValues("out").Add(float64(c.BytesOut))
		m.bytes.WithLabelValues("in").Add(float64(c.BytesIn))
	}
}

// BackgroundEnded counts a background run by how it ended.
func (m *Metrics) BackgroundEnded(ending string) {
	if m != nil {
		m.background.WithLabelValues(ending).Inc()
	}
}

// LongRunsHeld sets how many long runs the server holds.
func (m *Metrics) LongRunsHeld(n int) {
	if m != nil {
		m.longRuns.Set(float64(n))
	}
}

// HTTPRefused counts a connection or request the HTTP listener refused.
func (m *Metrics) HTTPRefused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	descRunning  = prometheus.NewDesc("runbox_runs_in_progress", "Boxes running a job now.", nil, nil)
	descWaiting  = prometheus.NewDesc("runbox_queue_depth", "Calls waiting for a slot now.", nil, nil)
	descAlive    = prometheus.NewDesc("runbox_containers_alive", "This server's boxes on the engine now (running, pooled or being removed).", nil, nil)
	descPoolIdle = prometheus.NewDesc("runbox_pool_idle_boxes", "Pooled boxes waiting for a job, by language.", []string{"language"}, nil)

	descSessionsOpen   = prometheus.NewDesc("runbox_sessions_open", "Sessions open on this server now.", nil, nil)
	descSessionsOpened = prometheus.NewDesc("runbox_sessions_opened_total", "Sessions opened by this server.", nil, nil)
	descSessionsLost   = prometheus.NewDesc("runbox_sessions_lost_total", "Sessions whose state was lost (timeout, out of memory, the interpreter or its box gone).", nil, nil)
	descSessionCalls   = prometheus.NewDesc("runbox_session_calls_total", "run_code calls answered in a session.", nil, nil)
)

// sessionSource is a Source that keeps sessions.
type sessionSource interface {
	SessionStats() sandbox.SessionStats
}

// stateCollector reads the runner's state at scrape time.
type stateCollector struct{ src Source }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRunning
	ch <- descWaiting
	ch <- descAlive
	ch <- descPoolIdle
	if _, ok := c.src.(sessionSource); ok {
		ch <- descSessionsOpen
		ch <- descSessionsOpened
		ch <- descSessionsLost
		ch <- descSessionCalls
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(s.Running))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(s.Waiting))
	ch <- prometheus.MustNewConstMetric(descAlive, prometheus.GaugeValue, float64(s.Alive))
	for lang, n := range s.PoolIdle {
		ch <- prometheus.MustNewConstMetric(descPoolIdle, prometheus.GaugeValue, float64(n), lang)
	}
	if ss, ok := c.src.(sessionSource); ok {
		st := ss.SessionStats()
		ch <- prometheus.MustNewConstMetric(descSessionsOpen, prometheus.GaugeValue, float64(st.Open))
		ch <- prometheus.MustNewConstMetric(descSessionsOpened, prometheus.CounterValue, float64(st.Opened))
		ch <- prometheus.MustNewConstMetric(descSessionsLost, prometheus.CounterValue, float64(st.Lost))
		ch <- prometheus.MustNewConstMetric(descSessionCalls, prometheus.CounterValue, float64(st.Calls))
	}
}

// ObserveToolCall counts one call of the code to an upstream tool.
func (m *Metrics) ObserveToolCall(server, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(server, outcome).Inc()
	m.toolSeconds.WithLabelValues(server).Observe(d.Seconds())
}

// ExposureSource counts the session exposures open now (expose.Set is
// one).
type ExposureSource interface {
	ExposureCounts() (exposures, connections, streams int)
}

var (
	descExposuresOpen   = prometheus.NewDesc("runbox_exposures_open", "Session exposures (session_expose) open now.", nil, nil)
	descExposureConns   = prometheus.NewDesc("runbox_exposure_connections_open", "Connections open now to session exposures, those being refused included.", nil, nil)
	descExposureStreams = prometheus.NewDesc("runbox_exposure_streams_open", "Streams open now from session exposures into their boxes.", nil, nil)
)

// WatchExposures reports src's counts at scrape time; call it once.
func (m *Metrics) WatchExposures(src ExposureSource) {
	if m != nil && src != nil {
		m.reg.MustRegister(exposureCollector{src})
	}
}

// exposureCollector reads the exposures' counts at scrape time.
type exposureCollector struct{ src ExposureSource }

func (c exposureCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExposuresOpen
	ch <- descExposureConns
	ch <- descExposureStreams
}

func (c exposureCollector) Collect(ch chan<- prometheus.Metric) {
	e, conns, streams := c.src.ExposureCounts()
	ch <- prometheus.MustNewConstMetric(descExposuresOpen, prometheus.GaugeValue, float64(e))
	ch <- prometheus.MustNewConstMetric(descExposureConns, prometheus.GaugeValue, float64(conns))
	ch <- prometheus.MustNewConstMetric(descExposureStreams, prometheus.GaugeValue, float64(streams))
}
