package fit

import (
	"context"
	"fmt"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
)

// FusionFit is what ReferenceFusion chose and how it scored.
type FusionFit struct {
	// Fusion is the chosen weights.
	Fusion calibrate.Fusion `json:"fusion"`
	// Before and After are the objective (the mean of the categories' and
	// the tools' mean reciprocal rank of each held-out example's own
	// label) at the starting weights and at the chosen ones.
	Before float64 `json:"objective_before"`
	After  float64 `json:"objective_after"`
	// CategoryMRR and ToolMRR are the two halves at the chosen weights.
	CategoryMRR float64 `json:"category_mrr"`
	ToolMRR     float64 `json:"tool_mrr"`
	// CategoryExamples and ToolExamples count the held-out examples.
	CategoryExamples int `json:"category_examples"`
	ToolExamples     int `json:"tool_examples"`
	// Changed lists the weights that moved, "name: old -> new".
	Changed []string `json:"changed,omitempty"`
}

// referenceKnobs are the weights ReferenceFusion fits, each with its
// candidate values: the lexical bonuses (pattern, keyword, name), BM25,
// the tool pooling and the server/tool lifts. Each list holds the value
// DefaultCalibration had for all-MiniLM-L6-v2, so a model that agrees
// keeps it (a value must beat the current one to replace it).
var referenceKnobs = []fusionKnob{
	{"pattern", func(f *calibrate.Fusion) *float64 { return &f.Pattern }, []float64{0.3, 0, 0.1, 0.2, 0.4, 0.5}},
	{"keyword", func(f *calibrate.Fusion) *float64 { return &f.Keyword }, []float64{0.12, 0, 0.04, 0.08, 0.16, 0.24}},
	{"name", func(f *calibrate.Fusion) *float64 { return &f.Name }, []float64{0.2, 0, 0.1, 0.3}},
	{"bm25", func(f *calibrate.Fusion) *float64 { return &f.BM25 }, []float64{0.018, 0, 0.006, 0.012, 0.024, 0.036}},
	{"tool_centroid", func(f *calibrate.Fusion) *float64 { return &f.ToolCentroid }, []float64{0.5, 0.3, 0.7}},
	{"tool_description", func(f *calibrate.Fusion) *float64 { return &f.ToolDescription }, []float64{0.7, 0.35, 1, 1.5}},
	{"tool_from_server", func(f *calibrate.Fusion) *float64 { return &f.ToolFromServer }, []float64{0.15, 0, 0.3}},
	{"server_from_category", func(f *calibrate.Fusion) *float64 { return &f.ServerFromCategory }, []float64{0.9, 0.6, 0.75}},
}

// ReferenceFusion fits the fusion weights of the model that embedded ref
// (the reference catalog, data/catalogs/default.json) on ref's own
// examples, starting from base: every category example and every tool
// example is scored as a request with itself left out (as Fit does), and
// coordinate ascent over referenceKnobs keeps the weights that give the
// best mean of the categories' and the tools' mean reciprocal rank. The
// lexical bonuses say how much a keyword or pattern hit is worth next to
// this model's cosines, which differ from model to model (e5's sit in a
// narrow band, MiniLM's spread wide): fitted once per model by `gen-index
// fit-fusion` and committed (models/fusion), never taken from another
// model's fit. Fit still fits the catalog's own tool weights on top when
// the catalog has enough tool examples.
func ReferenceFusion(ctx context.Context, ref *index.Index, base calibrate.Fusion) (FusionFit, error) {
	// Turns are scored with BM25 on, whatever the weight being tried.
	probe := base
	probe.BM25 = max(probe.BM25, 1)
	rk, err := rank.New(ref, nil, rank.Options{Fusion: probe})
	if err != nil {
		return FusionFit{}, err
	}
	catEx := rank.Examples(ref, rk.Categories())
	toolEx := rank.Examples(ref, rk.Tools())
	if len(catEx) == 0 && len(toolEx) == 0 {
		return FusionFit{}, fmt.Errorf("fit: the reference catalog has no examples to fit on")
	}
	dots := make([]float32, ref.NumVectors())
	catTurns := make([]rank.Turn, len(catEx))
	for i, ex := range catEx {
		catTurns[i] = rk.HeldOut(ex, dots, false)
	}
	toolTurns := make([]rank.Turn, len(toolEx))
	for i, ex := range toolEx {
		toolTurns[i] = rk.WithExampleBM25(rk.HeldOut(ex, dots, false), ex)
	}
	all := rk.AllServers()
	score := func(f calibrate.Fusion) (obj, cat, tool float64) {
		r := rk.WithFusion(f)
		for i, ex := range catEx {
			cat += reciprocalRank(rank.SortedByScore(r.CategoryScores(catTurns[i:i+1])), ex.Label)
		}
		for i, ex := range toolEx {
			_, ts, _, _ := r.RouteScores(toolTurns[i:i+1], all)
			tool += reciprocalRank(ts, ex.Label)
		}
		var parts float64
		if len(catEx) > 0 {
			cat /= float64(len(catEx))
			obj += cat
			parts++
		}
		if len(toolEx) > 0 {
			tool /= float64(len(toolEx))
			obj += tool
			parts++
		}
		return obj / parts, cat, tool
	}
	best := base
	before, _, _ := score(best)
	bestObj := before
	for round := 0; round < maxFusionRounds; round++ {
		changed := false
		for _, k := range referenceKnobs {
			for _, v := range k.values {
				if err := ctx.Err(); err != nil {
					return FusionFit{}, err
				}
				if *k.field(&best) == v {
					continue
				}
				f := best
				*k.field(&f) = v
				if o, _, _ := score(f); o > bestObj+1e-9 {
					best, bestObj, changed = f, o, true
				}
			}
		}
		if !changed {
			break
		}
	}
	after, cat, tool := score(best)
	out := FusionFit{Fusion: best, Before: before, After: after, CategoryMRR: cat, ToolMRR: tool,
		CategoryExamples: len(catEx), ToolExamples: len(toolEx)}
	for _, k := range referenceKnobs {
		if o, n := *k.field(&base), *k.field(&best); o != n {
			out.Changed = append(out.Changed, fmt.Sprintf("%s: %g -> %g", k.name, o, n))
		}
	}
	return out, nil
}

// reciprocalRank is 1/rank of label li in ss, sorted best first; 0 if
// absent.
func reciprocalRank(ss []rank.Score, li int) float64 {
	for r, s := range ss {
		if s.Label == li {
			return 1 / float64(r+1)
		}
	}
	return 0
}

// String is a one-line summary of the fit.
func (f FusionFit) String() string {
	ch := "none"
	if len(f.Changed) > 0 {
		ch = strings.Join(f.Changed, ", ")
	}
	return fmt.Sprintf("objective %.4f -> %.4f (category MRR %.4f on %d examples, tool MRR %.4f on %d); changed: %s",
		f.Before, f.After, f.CategoryMRR, f.CategoryExamples, f.ToolMRR, f.ToolExamples, ch)
}
