package mcpproxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/classifierd/classifierd/session"
)

// metrics are the proxy's Prometheus series (docs/operations.md lists
// them), registered on Config.Metrics. Their labels are bounded: server
// names come from the configuration, and tool names are never labels.
type metrics struct {
	calls     *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	refused   *prometheus.CounterVec
	displaced prometheus.Counter
}

// newMetrics registers the series on reg, with every label value known
// at start set to zero so rates have a start; sessions reads the live
// sessions at scrape time.
func newMetrics(reg prometheus.Registerer, servers []string, sessions func() float64) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_proxy_tool_calls_total",
			Help: "Tool calls forwarded to the real servers, by server and code: ok, or error (a tool result with isError, or no answer)."},
			[]string{"server", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "classifierd_proxy_tool_call_duration_seconds",
			Help:    "Time of a tool call forwarded to a real server, by server.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"server"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_proxy_sessions_refused_total",
			Help: "Agent sessions refused with RESOURCE_EXHAUSTED, by the limit reached: per_client (--max-sessions-per-client) or total (--max-sessions)."},
			[]string{"limit"}),
		displaced: prometheus.NewCounter(prometheus.CounterOpts{Name: "classifierd_proxy_sessions_displaced_total",
			Help: "Agent sessions closed at --max-sessions to make room for a caller holding fewer than the busiest caller (its least recently used)."}),
	}
	live := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "classifierd_proxy_sessions",
		Help: "Live agent sessions (MCP sessions, or the one stdio session)."}, sessions)
	for _, c := range []prometheus.Collector{m.calls, m.seconds, m.refused, m.displaced, live} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, s := range servers {
		m.calls.WithLabelValues(s, "ok")
		m.calls.WithLabelValues(s, "error")
		m.seconds.WithLabelValues(s)
	}
	m.refused.WithLabelValues("per_client")
	m.refused.WithLabelValues("total")
	return m, nil
}

// call records a forwarded call to server that took since start.
func (m *metrics) call(server string, start time.Time, failed bool) {
	if m == nil {
		return
	}
	code := "ok"
	if failed {
		code = "error"
	}
	m.calls.WithLabelValues(server, code).Inc()
	m.seconds.WithLabelValues(server).Observe(time.Since(start).Seconds())
}

// sessionRefused counts a session Places refused with err.
func (m *metrics) sessionRefused(err error) {
	if limit := session.LimitReached(err); m != nil && limit != "" {
		m.refused.WithLabelValues(limit).Inc()
	}
}

// sessionDisplaced counts a session closed to make way for a quieter
// caller.
func (m *metrics) sessionDisplaced() {
	if m != nil {
		m.displaced.Inc()
	}
}
