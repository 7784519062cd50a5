package classify

import (
	"context"
	"fmt"
	"testing"

	"github.com/classifierd/classifierd/catalog"
)

// BenchmarkRouteScoring is Route without the model (a fast fake embedder):
// the cost of scoring, fusion, calibration and reasoning by catalog size.
func BenchmarkRouteScoring(b *testing.B) {
	for _, tools := range []int{100, 1000} {
		cat := &catalog.Catalog{Categories: []catalog.Category{{ID: "meta", Description: "meta tools help"}}}
		for s := 0; s < tools/10; s++ {
			srv := catalog.Server{ID: fmt.Sprintf("srv%d", s), Description: fmt.Sprintf("server %d does things number %d", s, s)}
			for t := 0; t < 10; t++ {
				srv.Tools = append(srv.Tools, catalog.Tool{Name: fmt.Sprintf("tool_%d", t), Description: fmt.Sprintf("tool %d of server %d reads writes lists", t, s),
					Examples: []string{fmt.Sprintf("please run tool %d on server %d", t, s)}})
			}
			cat.Servers = append(cat.Servers, srv)
		}
		c := bowClassifier(b, cat, 512, nil)
		b.Run(fmt.Sprintf("tools=%d", tools), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.Route(context.Background(), RouteQuery{Query: "please run tool 3 on server 7"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
