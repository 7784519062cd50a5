package rank

import (
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testindex"
)

// testRanker indexes cat with the bag-of-words fake of dims dimensions and
// ranks with it on the default fusion weights.
func testRanker(t testing.TB, cat *catalog.Catalog, dims int) *Ranker {
	t.Helper()
	r, err := New(testindex.Build(t, cat, dims), testindex.Embedder{Dims: dims}, Options{Fusion: calibrate.DefaultCalibration().Fusion})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
