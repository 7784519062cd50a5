package classify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
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
