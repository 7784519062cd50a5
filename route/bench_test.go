package route

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testrank"
)

// BenchmarkRouteScoring is Route without the model (a fast fake embedder):
// the cost of scoring, fusion, calibration and reasoning by catalog size,
// for one request and for a two-need one (scored whole and by part).
func BenchmarkRouteScoring(b *testing.B) {
	for _, tools := range benchSizes() {
		cat := &catalog.Catalog{Categories: []catalog.Category{{ID: "meta", Description: "meta tools help"}}}
		for s := 0; s < tools/10; s++ {
			srv := catalog.Server{ID: fmt.Sprintf("srv%d", s), Description: fmt.Sprintf("server %d does things number %d", s, s)}
			for t := 0; t < 10; t++ {
				srv.Tools = append(srv.Tools, catalog.Tool{Name: fmt.Sprintf("tool_%d", t), Description: fmt.Sprintf("tool %d of server %d reads writes lists", t, s),
					Examples: []string{fmt.Sprintf("please run tool %d on server %d", t, s)}})
			}
			cat.Servers = append(cat.Servers, srv)
		}
		c := bowRouter(b, cat, 512)
		for name, q := range map[string]string{
			"one":      "please run tool 3 on server 7",
			"compound": "please run tool 3 on server 7 and then list what tool 5 of server 12 reads",
		} {
			b.Run(fmt.Sprintf("tools=%d/%s", tools, name), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := c.Route(context.Background(), RouteQuery{Query: q}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchSizes are the catalog sizes of BenchmarkRouteScoring: 100 and
// 1,000 tools, and 10,000 and 100,000 with ROUTE_BENCH_LARGE=1 (make
// bench-scale measures those on real vectors).
func benchSizes() []int {
	if os.Getenv("ROUTE_BENCH_LARGE") != "" {
		return []int{100, 1000, 10_000, 100_000}
	}
	return []int{100, 1000}
}

// BenchmarkRouteTracing is Route without the model with tracing off (no
// span in the context: what every call pays when --otel-endpoint is
// unset) and on (a recording server span per call, as otelgrpc starts, and
// the SDK's batch processor exporting to nowhere): the CPU and allocations
// the spans add. The model's embed spans come on top, one or two per call.
func BenchmarkRouteTracing(b *testing.B) {
	cat := &catalog.Catalog{Categories: []catalog.Category{{ID: "meta", Description: "meta tools help"}}}
	for s := 0; s < 10; s++ {
		srv := catalog.Server{ID: fmt.Sprintf("srv%d", s), Description: fmt.Sprintf("server %d does things number %d", s, s)}
		for t := 0; t < 10; t++ {
			srv.Tools = append(srv.Tools, catalog.Tool{Name: fmt.Sprintf("tool_%d", t), Description: fmt.Sprintf("tool %d of server %d reads writes lists", t, s)})
		}
		cat.Servers = append(cat.Servers, srv)
	}
	c := bowRouter(b, cat, 512)
	q := RouteQuery{Query: "please run tool 3 on server 7 and then list what tool 5 of server 12 reads"}
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Route(context.Background(), q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		tr := tp.Tracer("bench")
		b.ReportAllocs()
		for b.Loop() {
			ctx, sp := tr.Start(context.Background(), "classifier.v1.ClassifierService/Route")
			if _, err := c.Route(ctx, q); err != nil {
				b.Fatal(err)
			}
			sp.End()
		}
	})
}

// BenchmarkCatalogShape is the one-off cost at load of the catalog's
// shape (the twins), by number of servers of one tool each without a
// description of their own (the tools' descriptions stand for them), on
// the fake embedder's 384-dimension vectors: every pair up to 4,096
// servers, a bounded sample beyond.
func BenchmarkCatalogShape(b *testing.B) {
	sizes := []int{100, 1000, 4096}
	if os.Getenv("ROUTE_BENCH_LARGE") != "" {
		sizes = append(sizes, 20_000)
	}
	for _, n := range sizes {
		cat := &catalog.Catalog{Categories: []catalog.Category{{ID: "meta", Description: "meta tools help"}}}
		for s := range n {
			cat.Servers = append(cat.Servers, catalog.Server{ID: fmt.Sprintf("srv%d", s),
				Tools: []catalog.Tool{{Name: fmt.Sprintf("tool_%d", s), Description: fmt.Sprintf("tool %d reads writes lists item %d", s, s%97)}}})
		}
		rk := testrank.Ranker(b, cat, 384, nil)
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			// CPU time as well as wall time: on a shared machine the
			// wall time is mostly waiting for a core.
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				sh := catalogShape(rk, shapeBudget)
				if len(sh.twin) != n {
					b.Fatalf("%d twins, want %d", len(sh.twin), n)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
