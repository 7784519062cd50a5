package classify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
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
	idx, err := indexbuild.Build(context.Background(), cat, bowEmbedder{dims: 128}, indexbuild.Model{Name: "bow", Fingerprint: "f", Dims: 128}, indexbuild.Options{})
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
	if err := cal.validate(); err != nil {
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
	c := newTestClassifier(t, nil) // tools without examples
	cal, err := Fit(context.Background(), c.idx, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultCalibration().Fusion
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

func TestNeedParts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"read config.json and push it to my repo", []string{"read config.json", "push it to my repo"}},
		{"I need the PDF guide. Can you also email it?", []string{"I need the PDF guide", "Can you", "email it?"}},
		{"how many users signed up last week? query the database", []string{"how many users signed up last week? query the database"}},
		{"news as well as stock prices", []string{"news", "stock prices"}},
		{"open v1.2 notes", []string{"open v1.2 notes"}},
	} {
		if got := needParts(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("needParts(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestFitPlattGap recovers the parameters of a known model from samples
// drawn from it.
func TestFitPlattGap(t *testing.T) {
	const A, G, B = -5.0, 20.0, 2.0
	r := rand.New(rand.NewSource(7))
	var s, gap []float64
	var pos []bool
	for i := 0; i < 20000; i++ {
		x, g := r.Float64(), 0.0
		if r.Intn(2) == 1 {
			g = r.Float64() * 0.3
		}
		p := 1 / (1 + math.Exp(A*x+G*g+B))
		s, gap, pos = append(s, x), append(gap, g), append(pos, r.Float64() < p)
	}
	a, g, b := fitPlattGap(s, gap, pos)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"A", a, A}, {"G", g, G}, {"B", b, B}} {
		if math.Abs(c.got-c.want) > 0.15*math.Abs(c.want) {
			t.Errorf("%s: got %.3f, want %.3f within 15%%", c.name, c.got, c.want)
		}
	}
	m := Binary{Method: "platt-gap", A: a, G: g, B: b}
	if top, below := m.ProbAt(0.8, 0), m.ProbAt(0.8, 0.1); !(top > below) {
		t.Errorf("ProbAt: the best label %.3f should beat one 0.1 below it at the same score %.3f", top, below)
	}
}

// TestFitPlattGapRealServers fits the server samples gen-index collected
// on the default catalog with all-MiniLM-L6-v2-int8 (scores and gaps
// rounded to 4 decimals; testdata/platt-servers-minilm.json). Every
// held-out example's own server is its best (gap 0), so a gap threshold
// nearly separates the samples: plain Newton steps overshot there and ran
// the weights off to about 1e11, which maps every score to 0 or 1 and made
// Route abstain on in-scope requests. On Platt's smoothed targets the
// optimum is finite; the fit must find it.
func TestFitPlattGapRealServers(t *testing.T) {
	data, err := os.ReadFile("testdata/platt-servers-minilm.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Score, Gap []float64
		Pos        []bool
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	a, g, b := fitPlattGap(d.Score, d.Gap, d.Pos)
	for name, w := range map[string]float64{"A": a, "G": g, "B": b} {
		if math.IsNaN(w) || math.Abs(w) > 1000 {
			t.Errorf("%s = %g: the fit ran away", name, w)
		}
	}
	m := Binary{Method: "platt-gap", A: a, G: g, B: b}
	// A clear best server (score 0.7, gap 0) is likely relevant; one 0.3
	// below the best is not; neither is certain.
	if p := m.ProbAt(0.7, 0); p < 0.5 || p > 0.999 {
		t.Errorf("best server at 0.7: p = %.4f, want in [0.5, 0.999]", p)
	}
	if p := m.ProbAt(0.5, 0.3); p > 0.1 || p <= 0 {
		t.Errorf("a server 0.3 below the best: p = %.6f, want in (0, 0.1]", p)
	}
	var held []float64
	for i := range d.Score {
		held = append(held, m.ProbAt(d.Score[i], d.Gap[i]))
	}
	if e := ECE(held, d.Pos, 15); e > 0.03 {
		t.Errorf("ECE on the fitting samples %.4f, want <= 0.03", e)
	}
}

// TestReferencePrior learns the description-only maps on a reference
// catalog with examples, and UseReference puts them in place of the
// hard-coded prior only.
func TestReferencePrior(t *testing.T) {
	ctx := context.Background()
	ref, err := ReferencePrior(ctx, fitCatalog(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]Binary{"categories_multi": ref.CategoriesMulti, "servers": ref.Servers, "tools": ref.Tools} {
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

	prior := DefaultCalibration()
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
	idx, err := indexbuild.Build(context.Background(), cat, bowEmbedder{dims: 128}, indexbuild.Model{Name: "bow", Fingerprint: "f", Dims: 128}, indexbuild.Options{})
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
