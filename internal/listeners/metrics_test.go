package listeners

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// countingGatherer counts its gathers.
type countingGatherer struct {
	prometheus.Gatherer
	n atomic.Int64
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.n.Add(1)
	return g.Gatherer.Gather()
}

// TestMetricsGathersBounded: a flood of scrapes gathers the registry at
// most MetricsGathersPerSecond times a second after its burst, each
// scrape still answered whole (text and gzip), and a scrape after a
// quiet second sees the latest values.
func TestMetricsGathersBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_events_total", Help: "events"})
	reg.MustRegister(c)
	g := &countingGatherer{Gatherer: reg}
	m := newMetricsCache(g)
	clock := time.Unix(1e9, 0)
	m.now = func() time.Time { return clock }
	peer := 0
	scrape := func(gz bool) string {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		peer++ // many peers, each under its own bound (TestMetricsScrapesPerPeerBounded)
		r.RemoteAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(peer >> 8), byte(peer), 1}), 1).String()
		if gz {
			r.Header.Set("Accept-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		m.ServeHTTP(w, r)
		body := io.Reader(w.Body)
		if gz {
			if w.Header().Get("Content-Encoding") != "gzip" {
				t.Fatal("a gzip scrape answered without gzip")
			}
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for i := range 1000 {
		c.Inc()
		if got := scrape(i%2 == 0); !strings.Contains(got, "test_events_total ") {
			t.Fatalf("scrape %d: %q", i, got)
		}
	}
	if n := g.n.Load(); n > MetricsGatherBurst {
		t.Fatalf("1,000 scrapes at once gathered %d times, want at most %d", n, MetricsGatherBurst)
	}
	clock = clock.Add(10 * time.Second)
	c.Inc()
	if got := scrape(false); !strings.Contains(got, "test_events_total 1001") {
		t.Fatalf("after a quiet while the scrape is stale: %q", got)
	}
	before := g.n.Load()
	for range 100 {
		clock = clock.Add(10 * time.Millisecond) // 100 scrapes a second for a second
		scrape(false)
	}
	if n := g.n.Load() - before; n > MetricsGatherBurst+MetricsGathersPerSecond {
		t.Fatalf("100 scrapes in a second gathered %d times, want at most %d", n, MetricsGatherBurst+MetricsGathersPerSecond)
	}
}

// TestMetricsUnreadAnswersClosed: a connection that pipelines scrapes
// and never reads their answers is closed after MetricsWriteTimeout,
// not held until its idle timeout (the sixteenth hostile pass: 1,000 such
// connections, +214 MB and 1.6 cores of the daemon).
func TestMetricsUnreadAnswersClosed(t *testing.T) {
	reg := prometheus.NewRegistry()
	for i := range 200 { // an answer of some 60 KB
		reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "test_counter_" + strings.Repeat("x", 200) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Help: "h"}))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := ServeMetrics(ctx, addr, reg, nil, time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); wait() }()
	var nc net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if nc, err = net.Dial("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.(*net.TCPConn).SetReadBuffer(2048)
	w := bufio.NewWriter(nc)
	for range 200 {
		_, _ = w.WriteString("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	}
	_ = w.Flush()
	start := time.Now()
	time.Sleep(MetricsWriteTimeout + 2*time.Second) // never reading
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	// Closed: the rest is read to its end, or reset (the server closed
	// with bytes unread); open, the read runs into its deadline.
	if _, err := io.Copy(io.Discard, nc); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the connection is still open %v after its last request", time.Since(start))
		}
	}
}

// TestMetricsScrapesPerConnectionBounded: a connection's scrapes past
// its burst and rate are refused 429 with the connection closed; another
// connection's, from the same address, are served (a bound per peer let a
// local client keep every local scraper at 429).
func TestMetricsScrapesPerConnectionBounded(t *testing.T) {
	m := newMetricsCache(prometheus.NewRegistry())
	clock := time.Unix(1e9, 0)
	m.now = func() time.Time { return clock }
	flood, scraper := withScrapeBucket(context.Background()), withScrapeBucket(context.Background())
	code := func(conn context.Context) (int, string) {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(conn)
		r.RemoteAddr = "127.0.0.1:4000"
		w := httptest.NewRecorder()
		m.ServeHTTP(w, r)
		return w.Code, w.Header().Get("Connection")
	}
	for i := range MetricsScrapeBurst + 10 {
		c, conn := code(flood)
		if i < MetricsScrapeBurst && c != http.StatusOK {
			t.Fatalf("scrape %d of the burst: %d", i, c)
		}
		if i >= MetricsScrapeBurst+1 && (c != http.StatusTooManyRequests || conn != "close") {
			t.Fatalf("scrape %d past the burst: %d, Connection %q; want 429, close", i, c, conn)
		}
	}
	if c, _ := code(scraper); c != http.StatusOK {
		t.Fatalf("another connection's scrape from the same address beside the flood: %d", c)
	}
}

// TestMetricsNeverStale: one format scraped past the gathers' rate does
// not freeze another format's answer: every answer is at most
// MetricsMaxAge old (the review of the cache: Prometheus read the same
// value for a minute beside a local client scraping text 40 times a
// second).
func TestMetricsNeverStale(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_events_total", Help: "events"})
	reg.MustRegister(c)
	m := newMetricsCache(reg)
	clock := time.Unix(1e9, 0)
	m.now = func() time.Time { return clock }
	peer := 0
	scrape := func(accept string) string {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		peer++
		r.RemoteAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(peer >> 8), byte(peer), 1}), 1).String()
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		m.ServeHTTP(w, r)
		return w.Body.String()
	}
	const other = "text/plain;version=0.0.4;escaping=underscores"
	for i := range 400 { // 10 s at 40 scrapes a second
		clock = clock.Add(25 * time.Millisecond)
		c.Inc()
		scrape("text/plain")
		if i%60 == 59 {
			want := fmt.Sprintf("test_events_total %d", i+1-int(MetricsMaxAge/(25*time.Millisecond)))
			got := scrape(other)
			var n int
			if _, err := fmt.Sscanf(got[strings.Index(got, "\ntest_events_total ")+1:], "test_events_total %d", &n); err != nil || n < i+1-int(MetricsMaxAge/(25*time.Millisecond)) {
				t.Fatalf("after %d events the other format's answer is older than %v: %q (want at least %q)", i+1, MetricsMaxAge, got, want)
			}
		}
	}
}
