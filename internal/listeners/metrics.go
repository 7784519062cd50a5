package listeners

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// MetricsGathersPerSecond bounds how often a scrape gathers the registry
// and encodes its answer afresh (after a burst of MetricsGatherBurst);
// past it, scrapes are served the last answer made in their format, at
// most a fraction of a second old. A scrape needs no token, and each
// gathered every collector: the learning gauges summarise every stored
// report, so a scrape cost the daemon 2.2 ms of CPU with nothing learnt
// and 20-23 ms at 10,000 reports, and 4 pipelining connections with no
// token used 10 s of the daemon's CPU in 15 s against their client's 0.78
// s (the sixteenth hostile pass). Prometheus scrapes every 15 s or more.
const (
	MetricsGathersPerSecond = 4
	MetricsGatherBurst      = 8
)

// MetricsWriteTimeout bounds a metrics connection's request and answer:
// a client that pipelined scrapes and never read their answers held a
// blocked handler each, its own gzip writer with it, until the
// connection's idle timeout (1,000 connections: +214 MB and 1.6 cores,
// the sixteenth hostile pass).
const MetricsWriteTimeout = 10 * time.Second

// metricsCache serves a registry's metrics, gathered and encoded afresh
// at most MetricsGathersPerSecond times a second (a token bucket), else
// the last answer in the scrape's format; scrapes wait for the one
// encoding under way, then share its bytes.
type metricsCache struct {
	g   prometheus.Gatherer
	now func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	entries map[metricsKey]*metricsAnswer // the formats NegotiateAccept names: a few dozen at most
}

type metricsKey struct {
	format expfmt.Format
	gzip   bool
}

type metricsAnswer struct {
	body []byte
	err  error
}

func newMetricsCache(g prometheus.Gatherer) *metricsCache {
	return &metricsCache{g: g, now: time.Now, tokens: MetricsGatherBurst, entries: map[metricsKey]*metricsAnswer{}}
}

func (m *metricsCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := metricsKey{format: expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...), gzip: acceptsGzip(r.Header.Get("Accept-Encoding"))}
	a := m.answer(k)
	if a.err != nil {
		http.Error(w, "gathering the metrics failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(k.format))
	if k.gzip {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Vary", "Accept, Accept-Encoding")
	_, _ = w.Write(a.body)
}

// answer is k's answer: made afresh while the bucket has tokens (or when
// k has none yet), else the last one.
func (m *metricsCache) answer(k metricsKey) *metricsAnswer {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.tokens = min(MetricsGatherBurst, m.tokens+now.Sub(m.last).Seconds()*MetricsGathersPerSecond)
	m.last = now
	a := m.entries[k]
	if a != nil && m.tokens < 1 {
		return a
	}
	m.tokens = max(0, m.tokens-1)
	a = &metricsAnswer{}
	a.body, a.err = encodeMetrics(m.g, k)
	m.entries[k] = a
	return a
}

func encodeMetrics(g prometheus.Gatherer, k metricsKey) ([]byte, error) {
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return nil, err
	}
	var buf bytes.Buffer
	var out interface {
		Write([]byte) (int, error)
	} = &buf
	var zw *gzip.Writer
	if k.gzip {
		zw = gzip.NewWriter(&buf)
		out = zw
	}
	enc := expfmt.NewEncoder(out, k.format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// acceptsGzip reports whether an Accept-Encoding value lists gzip (not
// refused with q=0).
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
