package fit

import (
	"context"
	"errors"
	"fmt"
	"github.com/classifierd/classifierd/rank"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
)

// fitCatalog has enough examples per category and per tool for every part
// of Fit to run: the single-label head, the multi-label maps and the tool
// fusion weights.
func fitCatalog(t *testing.T) *index.Index {
	t.Helper()
	topics := []string{"weather forecast rain", "stock price market", "recipe cooking dinner", "football match score"}
	cat := &catalog.Catalog{}
	for i, topic := range topics {
		c := catalog.Category{ID: fmt.Sprintf("cat%d", i), Description: topic}
		s := catalog.Server{ID: fmt.Sprintf("srv%d", i), Description: "server for " + topic, Categories: []string{c.ID}}
		for k := 0; k < 6; k++ {
			c.Examples = append(c.Examples, fmt.Sprintf("%s question %d", topic, k))
		}
		for j := 0; j < 2; j++ {
			tool := catalog.Tool{Name: fmt.Sprintf("tool_%d_%d", i, j), Description: fmt.Sprintf("%s tool %d", topic, j)}
			for k := 0; k < 3; k++ {
				tool.Examples = append(tool.Examples, fmt.Sprintf("use %s tool %d case %d", topic, j, k))
			}
			s.Tools = append(s.Tools, tool)
		}
		cat.Categories = append(cat.Categories, c)
		cat.Servers = append(cat.Servers, s)
	}
	idx, err := labels.Embed(context.Background(), cat, testindex.Embedder{Dims: 128}, labels.Model{Name: "bow", Fingerprint: "f", Dims: 128}, labels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestFit(t *testing.T) {
	idx := fitCatalog(t)
	cal, err := Fit(context.Background(), idx, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !cal.Fitted {
		t.Error("Fitted: got false, want true")
	}
	for name, m := range map[string]string{"categories": cal.Categories.Method, "categories_multi": cal.CategoriesMulti.Method,
		"servers": cal.Servers.Method, "tools": cal.Tools.Method} {
		if m == "prior" || m == "" {
			t.Errorf("%s method: got %q, want a fitted map", name, m)
		}
	}
	for name, thr := range map[string]float64{"categories": cal.Categories.Threshold, "servers": cal.Servers.Threshold, "tools": cal.Tools.Threshold} {
		if !(thr > 0 && thr < 1) {
			t.Errorf("%s threshold: got %v, want within (0,1)", name, thr)
		}
	}
	if !cal.FusionFitted {
		t.Error("tool fusion: got fitted=false, want true")
	}
	for _, k := range fusionKnobs {
		if v := *k.field(&cal.Fusion); !slices.Contains(k.values, v) {
			t.Errorf("tool fusion %s: got %v, want one of %v", k.name, v, k.values)
		}
	}
	if err := cal.Validate(); err != nil {
		t.Errorf("fitted calibration does not validate: %v", err)
	}

	// Deterministic: the same index gives the same calibration.
	again, err := Fit(context.Background(), idx, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cal, again) {
		t.Error("Fit is not deterministic")
	}
}

func TestFitKeepsDefaultFusionWithFewExamples(t *testing.T) {
	idx := testindex.Build(t, testindex.Parse(t, testindex.Catalog), 256) // tools without examples
	cal, err := Fit(context.Background(), idx, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def := calibrate.DefaultCalibration().Fusion
	if cal.FusionFitted || cal.Fusion != def {
		t.Errorf("fusion: got fitted=%v %+v, want the defaults %+v", cal.FusionFitted, cal.Fusion, def)
	}
}

func TestFitCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Fit(ctx, fitCatalog(t), FitOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fit with a cancelled context: got %v, want context.Canceled", err)
	}
}

// TestReferencePrior learns the description-only maps on a reference
// catalog with examples, and UseReference puts them in place of the
// hard-coded prior only.
func TestReferencePrior(t *testing.T) {
	ctx := context.Background()
	ref, err := ReferencePrior(ctx, fitCatalog(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]calibrate.Binary{"categories_multi": ref.CategoriesMulti, "servers": ref.Servers, "tools": ref.Tools} {
		if !strings.HasPrefix(b.Method, "reference/") || b.Samples == 0 || !(b.Threshold > 0 && b.Threshold < 1) {
			t.Errorf("%s: method %q, %d samples, threshold %v; want a fitted reference map", name, b.Method, b.Samples, b.Threshold)
		}
	}
	if ref.FusionFitted {
		t.Error("ReferencePrior fitted fusion weights; it must keep the defaults (no examples to fit them on)")
	}
	// Scored against descriptions alone, a held-out example scores lower
	// than with its label's other examples present, so the map fitted
	// that way gives a higher probability at the same mid-range score.
	full, err := Fit(ctx, fitCatalog(t), FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if full.Tools.ProbAt(0.3, 0) == ref.Tools.ProbAt(0.3, 0) {
		t.Error("the reference tool map equals the map fitted with examples: examples were not masked")
	}

	prior := calibrate.DefaultCalibration()
	prior.Servers = full.Servers // fitted: kept
	got := UseReference(prior, ref)
	if !reflect.DeepEqual(got.Servers, full.Servers) {
		t.Error("UseReference replaced a fitted map")
	}
	if !reflect.DeepEqual(got.Tools, ref.Tools) || !reflect.DeepEqual(got.CategoriesMulti, ref.CategoriesMulti) {
		t.Error("UseReference kept a prior map")
	}
	if got.Categories.Method != "prior" {
		t.Errorf("single-label categories: got %q, want the prior kept (not a multi-label map)", got.Categories.Method)
	}
}

// TestFitWithoutCategories fits a catalog of servers and tools only (as
// MetaTool's): the category maps keep the prior, the tool map is fitted.
func TestFitWithoutCategories(t *testing.T) {
	cat := &catalog.Catalog{}
	for i, topic := range []string{"weather forecast rain", "stock price market", "recipe cooking dinner"} {
		tool := catalog.Tool{Name: fmt.Sprintf("tool%d", i), Description: topic}
		for k := 0; k < 4; k++ {
			tool.Examples = append(tool.Examples, fmt.Sprintf("%s question %d", topic, k))
		}
		cat.Servers = append(cat.Servers, catalog.Server{ID: fmt.Sprintf("srv%d", i), Description: topic, Tools: []catalog.Tool{tool}})
	}
	idx, err := labels.Embed(context.Background(), cat, testindex.Embedder{Dims: 128}, labels.Model{Name: "bow", Fingerprint: "f", Dims: 128}, labels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Fit(context.Background(), idx, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cal.Categories.Method != "prior" || cal.CategoriesMulti.Method != "prior" {
		t.Errorf("categories: methods %q, %q; want the prior (there are no categories)", cal.Categories.Method, cal.CategoriesMulti.Method)
	}
	if cal.Tools.Method == "prior" {
		t.Error("tools: got the prior, want a map fitted on the tool examples")
	}
}

func TestEvenSampleBoundsFittingWork(t *testing.T) {
	var ex []rank.Example
	for i := 0; i < 1000; i++ {
		ex = append(ex, rank.Example{Label: i / 10, Vector: i})
	}
	if got := evenSample(ex, 2000); len(got) != 1000 {
		t.Fatalf("under the bound: %d examples, want all 1000", len(got))
	}
	got := evenSample(ex, 100)
	if len(got) != 100 || got[0].Vector != 0 || got[99].Vector != 990 {
		t.Fatalf("sample of 100: %d examples from %v to %v, want 100 spread over all", len(got), got[0], got[len(got)-1])
	}
	// Catalogs make eval measures (a few hundred tools, ≤ 5 examples
	// each) are fitted on every example.
	if n := fitWork / 200; n < 1000 {
		t.Errorf("200 tools: fitted on %d examples, want all of 1000", n)
	}
	if n := fusionWork / 200; n < 1000 {
		t.Errorf("200 tools: fusion chosen on %d examples, want all of 1000", n)
	}
}
