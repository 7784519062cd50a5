package fit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
)

// TestReferenceFusionFollowsTheEvidence: on a reference catalog where
// each held-out example shares a word with the next category's
// description (so the dense score ranks that one first) but carries its
// own category's keyword, the fitted keyword weight rises above the
// default and the objective with it; where no example carries a keyword,
// the weight stays the default's (ties keep it).
func TestReferenceFusionFollowsTheEvidence(t *testing.T) {
	base := calibrate.DefaultCalibration().Fusion
	fitted := func(withKeyword bool) FusionFit {
		t.Helper()
		cat := &catalog.Catalog{}
		kws := []string{"zebra", "yak", "walrus", "vole", "otter"}
		desc := func(i int) []string {
			i %= len(kws)
			return []string{fmt.Sprintf("alpha%d", i), fmt.Sprintf("beta%d", i), fmt.Sprintf("gamma%d", i), fmt.Sprintf("delta%d", i)}
		}
		for i, kw := range kws {
			ex := desc(i + 1)[0] + fmt.Sprintf(" one%d two%d three%d four%d", i, i, i, i)
			if withKeyword {
				ex = kw + " " + ex
			}
			cat.Categories = append(cat.Categories, catalog.Category{ID: fmt.Sprintf("cat%d", i),
				Description: strings.Join(desc(i), " "), Keywords: []string{kw}, Examples: []string{ex}})
		}
		idx, err := labels.Embed(context.Background(), cat, testindex.Embedder{Dims: 128}, labels.Model{Name: "bow", Fingerprint: "f", Dims: 128}, labels.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ReferenceFusion(context.Background(), idx, base)
		if err != nil {
			t.Fatal(err)
		}
		if res.After < res.Before || res.CategoryExamples != len(kws) || res.ToolExamples != 0 {
			t.Errorf("fit %s: want the objective not to fall, %d category examples and no tool examples", res, len(kws))
		}
		return res
	}
	if res := fitted(true); !(res.Fusion.Keyword > base.Keyword && res.After > res.Before) {
		t.Errorf("keywords decide: fit %s; want the keyword weight above the default %v", res, base.Keyword)
	}
	if res := fitted(false); res.Fusion.Keyword != base.Keyword {
		t.Errorf("no keyword in any example: fit %s; want the default keyword weight kept", res)
	}
}

// TestFitStartsFromTheModelsFusion: Fit keeps the fusion it is given
// (the model's reference fit) where it fits nothing itself.
func TestFitStartsFromTheModelsFusion(t *testing.T) {
	f := calibrate.DefaultCalibration().Fusion
	f.Keyword, f.Pattern, f.ToolDescription = 0.31, 0.07, 1.25
	cal, err := Fit(context.Background(), fitCatalog(t), FitOptions{Fusion: &f})
	if err != nil {
		t.Fatal(err)
	}
	if got := cal.Fusion; got.Keyword != 0.31 || got.Pattern != 0.07 || got.ToolDescription != 1.25 {
		t.Errorf("fusion %+v: want the given keyword, pattern and tool description weights kept", got)
	}
}
