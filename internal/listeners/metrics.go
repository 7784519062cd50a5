package listeners

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/time/rate"
)

// MetricsGathersPerSecond bounds how often a scrape gathers the registry
// and encodes its answer afresh (after a burst of MetricsGatherBurst);
// past it, scrapes are served the last gathering, encoded once in their
// format, at most MetricsMaxAge old. A scrape needs no token, and each
// gathered every collector: the learning gauges summarise every stored
// report, so a scrape cost the daemon 2.2 ms of CPU with nothing learnt
// and 20-23 ms at 10,000 reports, and 4 pipelining connections with no
// token used 10 s of the daemon's CPU in 15 s against their client's 0.78
// s (the sixteenth hostile pass). Prometheus scrapes every 15 s or more.
const (
	MetricsGathersPerSecond = 4
	MetricsGatherBurst      = 8
	MetricsMaxAge           = time.Second
)

// MetricsScrapesPerSecond bounds each connection's scrapes (after a
// burst of MetricsScrapeBurst); past it a scrape is answered 429 and the
// connection closed. Served from the cache, a scrape still wrote its
// answer (4.5 KB gzipped): a client pipelining 28,000 scrapes a second
// cost the daemon 1.75 times its own CPU. Counted per connection, not per
// peer: a bound per peer (every loopback address one) let a local client
// with no token keep every local scraper at 429 (the re-verification of
// the sixteenth pass). A scraper scrapes once in 15 s or more.
const (
	MetricsScrapesPerSecond = 10
	MetricsScrapeBurst      = 20
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

	mu        sync.Mutex
	gathers   *rate.Limiter
	mfs       []*dto.MetricFamily // the last gathering, at gathered, number gen
	gatherErr error
	gathered  time.Time
	gen       int
	entries   map[metricsKey]*metricsAnswer // the formats NegotiateAccept names: a few dozen at most
}

// scrapeBucketKey carries a metrics connection's bucket
// (ServeMetrics's ConnContext).
type scrapeBucketKey struct{}

// withScrapeBucket is ctx, a new connection's, with its scrape bucket.
func withScrapeBucket(ctx context.Context) context.Context {
	return context.WithValue(ctx, scrapeBucketKey{}, rate.NewLimiter(MetricsScrapesPerSecond, MetricsScrapeBurst))
}

// admit reports whether the connection of ctx may scrape now (one not
// counted may).
func (m *metricsCache) admit(ctx context.Context) bool {
	b, ok := ctx.Value(scrapeBucketKey{}).(*rate.Limiter)
	return !ok || b.AllowN(m.now(), 1)
}

type metricsKey struct {
	format expfmt.Format
	gzip   bool
}
type metricsAnswer struct {
	gen  int // the gathering it encodes
	body []byte
	err  error
}

func newMetricsCache(g prometheus.Gatherer) *metricsCache {
	return &metricsCache{g: g, now: time.Now, gathers: rate.NewLimiter(MetricsGathersPerSecond, MetricsGatherBurst), entries: map[metricsKey]*metricsAnswer{}}
}

func (m *metricsCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.admit(r.Context()) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many scrapes on this connection", http.StatusTooManyRequests)
		return
	}
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
	// Gathered afresh when the bucket allows, and at least once in
	// MetricsMaxAge whatever it says: one format scraped often must not
	// leave another's answer stale (the review of this cache: a local
	// client scraping text 40 times a second froze Prometheus's numbers).
	if m.gathers.AllowN(now, 1) || m.mfs == nil || now.Sub(m.gathered) >= MetricsMaxAge {
		m.mfs, m.gatherErr = m.g.Gather()
		m.gathered = now
		m.gen++
	}
	if a := m.entries[k]; a != nil && a.gen == m.gen {
		return a
	}
	a := &metricsAnswer{gen: m.gen}
	a.body, a.err = encodeMetrics(m.mfs, m.gatherErr, k)
	m.entries[k] = a
	return a
}

func encodeMetrics(mfs []*dto.MetricFamily, err error, k metricsKey) ([]byte, error) {
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
