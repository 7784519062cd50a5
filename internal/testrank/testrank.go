// Package testrank builds a rank.Ranker over a testindex index for the
// policy packages' unit tests (route, classify, analyze). It is apart from
// testindex because rank's own tests use testindex.
package testrank

import (
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/rank"
)

// Ranker indexes cat with the bag-of-words fake and ranks with emb (the
// fake when nil) on the default fusion weights.
func Ranker(tb testing.TB, cat *catalog.Catalog, dims int, emb rank.Embedder) *rank.Ranker {
	tb.Helper()
	if emb == nil {
		emb = testindex.Embedder{Dims: dims}
	}
	rk, err := rank.New(testindex.Build(tb, cat, dims), emb, rank.Options{Fusion: calibrate.DefaultCalibration().Fusion})
	if err != nil {
		tb.Fatal(err)
	}
	return rk
}
