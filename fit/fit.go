// Package fit fits an index's calibration on the index's own examples:
// it scores held-out example vectors with rank, exactly as a request would
// be scored, and fits the maps of calibrate on those scores. It returns a
// new calibrate.Calibration and changes nothing it is given.
package fit

import (
	"context"
	"math"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
)

// FitOptions tunes Fit.
type FitOptions struct {
	// MinExamples is the fewest examples a label needs to count as
	// calibrated on its own; labels below it are reported as using the
	// shared map (default 1: labels with no examples at all).
	MinExamples int
	// Folds for choosing between Platt and isotonic maps (default 5).
	Folds int
	// Progress, if set, is called as samples are scored.
	Progress func(done, total int)
	// DescriptionsOnly scores each held-out example against descriptions
	// and names alone, as if the catalog had no examples at all: every
	// example vector is masked. ReferencePrior uses it to learn what a
	// description-only catalog's scores mean for the model at hand.
	DescriptionsOnly bool
	// Fusion, if set, is the model's fusion weights to start from (its
	// fit on the reference catalog, ReferenceFusion) instead of
	// DefaultCalibration's.
	Fusion *calibrate.Fusion
}

// Fit fits the calibration of idx on the index's own examples: each
// example vector is scored as a query with itself masked out (leave-one-out
// cross-validation without re-embedding), and, for the out-of-scope mass,
// once more with its whole label masked out, which is what a query for a
// label the catalog lacks looks like. Targets without enough examples keep
// the prior and say so.
func Fit(ctx context.Context, idx *index.Index, opts FitOptions) (calibrate.Calibration, error) {
	if opts.MinExamples <= 0 {
		opts.MinExamples = 1
	}
	if opts.Folds <= 0 {
		opts.Folds = 5
	}
	cal := calibrate.DefaultCalibration()
	cal.Fitted = true
	cal.Version = calibrate.Version1
	if opts.Fusion != nil {
		cal.Fusion = *opts.Fusion
	}
	// Fit on the fusion weights the daemon will use.
	rk, err := rank.New(idx, nil, rank.Options{Fusion: cal.Fusion, DescriptionsOnly: opts.DescriptionsOnly})
	if err != nil {
		return calibrate.Calibration{}, err
	}

	catEx := rank.Examples(idx, rk.Categories())
	allToolEx := rank.Examples(idx, rk.Tools())
	// Each held-out tool example ranks every tool: bound the work (an even
	// sample) so that fitting a large catalog is not quadratic in its size.
	toolEx := evenSample(allToolEx, max(minFitExamples, fitWork/max(1, len(rk.Tools()))))
	total := len(catEx) + len(toolEx)
	done := 0
	tick := func() {
		done++
		if opts.Progress != nil && (done%64 == 0 || done == total) {
			opts.Progress(done, total)
		}
	}

	// Categories: single-label (softmax + out-of-scope) and multi-label.
	var inScores [][]float64
	var inLabels, inVec []int
	var multiS, multiGap []float64
	var multiPos []bool
	dots := make([]float32, idx.NumVectors())
	catPos := map[int]int{}
	for j, li := range rk.Categories() {
		catPos[li] = j
	}
	for i, ex := range catEx {
		if err := ctx.Err(); err != nil {
			return calibrate.Calibration{}, err
		}
		t := rk.HeldOut(ex, dots, false)
		cs := rk.CategoryScores([]rank.Turn{t})
		inScores = append(inScores, rawScores(cs))
		inLabels = append(inLabels, catPos[ex.Label])
		inVec = append(inVec, ex.Vector)
		best := math.Inf(-1)
		for _, s := range cs {
			best = math.Max(best, s.Score)
		}
		for _, s := range cs {
			multiS = append(multiS, s.Score)
			multiGap = append(multiGap, best-s.Score)
			multiPos = append(multiPos, s.Label == ex.Label)
		}
		t = rk.HeldOut(ex, dots, true)
		oos := rk.CategoryScores([]rank.Turn{t})
		inScores = append(inScores, rawScores(oos))
		inLabels = append(inLabels, -1)
		inVec = append(inVec, ex.Vector)
		// The same request with its whole category held out is what a
		// request for a category the catalog lacks looks like: every
		// category is irrelevant to it, the best one too. One in
		// oosEvery held-out examples adds it (a fifth of the samples out
		// of scope): at one for one, the map would take every other
		// request for one the catalog cannot serve, and a clear request
		// to a catalog of descriptions alone would fall below 0.5.
		if i%oosEvery != 0 {
			tick()
			continue
		}
		best = math.Inf(-1)
		for _, s := range oos {
			best = math.Max(best, s.Score) // -Inf (unscored) never wins
		}
		for _, s := range oos {
			if math.IsInf(s.Score, -1) {
				continue // the held-out category itself: unscored
			}
			multiS = append(multiS, s.Score)
			multiGap = append(multiGap, best-s.Score)
			multiPos = append(multiPos, false)
		}
		tick()
	}
	if len(catEx) >= 2*opts.MinExamples {
		if head, oof := fitHead(ctx, rk, opts.Folds); head != nil {
			if w := calibrate.ChooseHeadWeight(inScores, inLabels, inVec, oof); w > 0 {
				cal.Head, cal.HeadWeight = head, w
				for i := range inScores {
					for j, lp := range oof[inVec[i]] {
						inScores[i][j] += w * lp
					}
				}
			}
		}
		cal.Categories = calibrate.FitSingle(inScores, inLabels, opts.Folds, cal.Categories.InScope)
		// A category's relevance depends on how far it falls below the
		// best category, not only on its score: with two examples a
		// category, a score of 0.5 is a match alone and no match at all
		// 0.5 below a category the request names ("Check my GitHub
		// notifications": git at 0.49 under github at 1.0).
		cal.CategoriesMulti = calibrate.ChooseBinaryGap(multiS, multiGap, multiPos, opts.Folds, cal.CategoriesMulti, calibrate.LabelFloor)
		cal.CategoriesMulti.SharedFallback = fewExamples(idx, rk.Categories(), opts.MinExamples)
	}

	// Tool fusion weights, where there are enough tool examples to tell.
	if !opts.DescriptionsOnly && len(allToolEx) >= minFusionExamples*len(rk.Tools()) && len(rk.Tools()) > 1 {
		f, err := fitToolFusion(ctx, rk, toolEx, dots)
		if err != nil {
			return calibrate.Calibration{}, err
		}
		rk = rk.WithFusion(f)
		cal.Fusion = f
		cal.FusionFitted = true
	}

	// Servers and tools: multi-label, from tool examples.
	var srvS, toolS, srvGap, toolGap []float64
	var srvPos, toolPos []bool
	all := rk.AllServers()
	for _, ex := range toolEx {
		if err := ctx.Err(); err != nil {
			return calibrate.Calibration{}, err
		}
		t := rk.HeldOut(ex, dots, false)
		ss, ts, _, _ := rk.RouteScores([]rank.Turn{t}, all)
		own := rk.ServerOf(ex.Label)
		for _, s := range ss {
			srvS = append(srvS, s.Score)
			srvGap = append(srvGap, ss[0].Score-s.Score)
			srvPos = append(srvPos, s.Label == own)
		}
		// Tools are fitted where Route decides about them: among the
		// best-ranked candidates. Fitted over every tool of the catalog,
		// the map learns the base rate of a random tool (1 in N) and
		// under-states the confidence of the tools Route returns (make
		// eval, default catalog, ECE over returned tools: 0.108 fitted on
		// every tool, 0.053 on the best 5; for servers, fitting on every
		// server measured better, 0.053 against 0.069).
		for _, s := range ts[:min(len(ts), fitTop)] {
			toolS = append(toolS, s.Score)
			toolGap = append(toolGap, ts[0].Score-s.Score)
			toolPos = append(toolPos, s.Label == ex.Label)
		}
		tick()
	}
	if len(toolEx) >= 2*opts.MinExamples {
		cal.Servers = calibrate.ChooseBinaryGap(srvS, srvGap, srvPos, opts.Folds, cal.Servers, calibrate.LabelFloor)
		cal.Tools = calibrate.ChooseBinaryGap(toolS, toolGap, toolPos, opts.Folds, cal.Tools, calibrate.ToolFloor)
		cal.Tools.SharedFallback = fewExamples(idx, rk.Tools(), opts.MinExamples)
	}
	return cal, nil
}

// oosEvery: one in oosEvery held-out category examples is also scored
// with its category held out, as an out-of-scope sample of the
// multi-label category map.
const oosEvery = 4

// fitTop is how many of the best-ranked tools per held-out example the
// tool map is fitted on.
const fitTop = 5

func fewExamples(idx *index.Index, labels []int, min int) []string {
	var out []string
	for _, li := range labels {
		n := 0
		for _, src := range idx.Labels[li].Sources {
			if src == index.SourceExample {
				n++
			}
		}
		if n < min {
			out = append(out, idx.Labels[li].ID)
		}
	}
	return out
}

func rawScores(cs []rank.Score) []float64 {
	out := make([]float64, len(cs))
	for i, s := range cs {
		out[i] = s.Score
	}
	return out
}

// Linear head: only for catalogs with enough examples per category to
// learn from, where it adds to the nearest-example evidence.
const (
	minHeadCategories = 3
	minHeadExamples   = 5 // on average per category
)

// fitHead trains the linear head on every category vector, and returns
// out-of-fold log-probabilities for each vector (k-fold: each vector is
// predicted by a head that never saw it).
func fitHead(ctx context.Context, rk *rank.Ranker, folds int) (*calibrate.Head, map[int][]float64) {
	var x [][]float32
	var y, vi []int
	for j, li := range rk.Categories() {
		l := &rk.Index().Labels[li]
		for v := l.First; v < l.First+l.Count; v++ {
			x = append(x, rk.Index().Vector(v))
			y = append(y, j)
			vi = append(vi, v)
		}
	}
	if len(rk.Categories()) < minHeadCategories || len(x) < minHeadExamples*len(rk.Categories()) {
		return nil, nil
	}
	oof := make(map[int][]float64, len(x))
	for f := 0; f < folds; f++ {
		if ctx.Err() != nil {
			return nil, nil
		}
		var tx [][]float32
		var ty []int
		for i := range x {
			if i%folds != f {
				tx = append(tx, x[i])
				ty = append(ty, y[i])
			}
		}
		h := calibrate.TrainHead(tx, ty, len(rk.Categories()), calibrate.HeadOptions{Seed: int64(f)})
		for i := f; i < len(x); i += folds {
			oof[vi[i]] = h.LogProbs(x[i])
		}
	}
	return calibrate.TrainHead(x, y, len(rk.Categories()), calibrate.HeadOptions{Seed: 99}), oof
}

// Work bounds for large catalogs, in held-out examples × tools ranked.
// Catalogs of a few hundred tools (every one make eval measures) stay
// below them and are fitted on all their examples.
const (
	// fitWork bounds the examples the server and tool maps are fitted on
	// (10,000 tools: 2,000 examples).
	fitWork = 20_000_000
	// fusionWork bounds the examples the fusion weights are chosen on,
	// each ranked once per candidate weight (10,000 tools: 200).
	fusionWork = 2_000_000
	// minFitExamples is the smallest sample the bounds cut to.
	minFitExamples = 200
)

// evenSample returns at most n of ex, spread evenly (ex itself when it
// has no more than n).
func evenSample(ex []rank.Example, n int) []rank.Example {
	if len(ex) <= n {
		return ex
	}
	out := make([]rank.Example, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ex[i*len(ex)/n])
	}
	return out
}

// gen-index fits the tool fusion weights instead of keeping the defaults.
const minFusionExamples = 2

// maxFusionExamples bounds the held-out examples the weights are chosen on.
const maxFusionExamples = 2000

// fusionKnob is one fitted tool fusion weight and its candidate values
// (the default first where it is one of them).
type fusionKnob struct {
	name   string
	field  func(*calibrate.Fusion) *float64
	values []float64
}

var fusionKnobs = []fusionKnob{
	{"tool_centroid", func(f *calibrate.Fusion) *float64 { return &f.ToolCentroid }, []float64{0.5, 0.3, 0.7}},
	{"bm25", func(f *calibrate.Fusion) *float64 { return &f.BM25 }, []float64{0.018, 0.012, 0.024}},
	{"tool_breadth", func(f *calibrate.Fusion) *float64 { return &f.ToolBreadth }, []float64{0, 0.1, 0.2, 0.3, 0.4}},
	{"example_bm25", func(f *calibrate.Fusion) *float64 { return &f.ExampleBM25 }, []float64{0, 0.005, 0.01, 0.015}},
}

// maxFusionRounds bounds the coordinate-ascent passes over fusionKnobs.
const maxFusionRounds = 4

// fitToolFusion chooses the tool fusion weights (fusionKnobs) by the mean
// reciprocal rank of each held-out tool example's own tool: the example
// is left out of its tool's vectors, centroid, breadth and example BM25
// documents (examples are never in the description BM25 documents). It
// is coordinate ascent: each pass tries every value of one weight with the
// others held, keeps the best, and moves to the next weight, until a pass
// changes nothing. A value must beat the current one to replace it, so
// ties keep the default.
func fitToolFusion(ctx context.Context, rk *rank.Ranker, toolEx []rank.Example, dots []float32) (calibrate.Fusion, error) {
	all := rk.AllServers()
	// Bound time and memory (each sample keeps a row of dot products and
	// is ranked against every tool about fifty times): an even sample.
	toolEx = evenSample(toolEx, min(maxFusionExamples, max(minFitExamples, fusionWork/max(1, len(rk.Tools())))))
	turns := make([]rank.Turn, len(toolEx))
	for i, ex := range toolEx {
		turns[i] = rk.HeldOut(ex, dots, false)
		// The candidates turn example BM25 on whatever the current weight.
		turns[i] = rk.WithExampleBM25(turns[i], ex)
	}
	mrr := func(f calibrate.Fusion) float64 {
		rk := rk.WithFusion(f)
		var sum float64
		for i, ex := range toolEx {
			_, ts, _, _ := rk.RouteScores(turns[i:i+1], all)
			for r, s := range ts {
				if s.Label == ex.Label {
					sum += 1 / float64(r+1)
					break
				}
			}
		}
		return sum / float64(len(toolEx))
	}
	best := rk.Fusion()
	bestMRR := mrr(best)
	for round := 0; round < maxFusionRounds; round++ {
		changed := false
		for _, k := range fusionKnobs {
			for _, v := range k.values {
				if err := ctx.Err(); err != nil {
					return calibrate.Fusion{}, err
				}
				if *k.field(&best) == v {
					continue
				}
				f := best
				*k.field(&f) = v
				if m := mrr(f); m > bestMRR+1e-9 {
					best, bestMRR, changed = f, m, true
				}
			}
		}
		if !changed {
			break
		}
	}
	return best, nil
}

// ReferencePrior fits, on a reference index (a catalog with examples,
// embedded by the same model), the maps that stand in for a catalog
// without examples: each reference example is scored against descriptions
// and names alone (FitOptions.DescriptionsOnly), which is what a request
// meets in a description-only catalog. A hard-coded prior would say what
// a score means for one model only; this learns it for the model that
// built the index. The returned maps say method "reference/<method>".
func ReferencePrior(ctx context.Context, ref *index.Index, fusion *calibrate.Fusion) (calibrate.Calibration, error) {
	cal, err := Fit(ctx, ref, FitOptions{DescriptionsOnly: true, Fusion: fusion})
	if err != nil {
		return calibrate.Calibration{}, err
	}
	for _, b := range []*calibrate.Binary{&cal.CategoriesMulti, &cal.Servers, &cal.Tools} {
		if b.Method != calibrate.MethodPrior {
			b.Method = "reference/" + b.Method
		}
		b.SharedFallback = nil
	}
	return cal, nil
}

// priorMaps are the multi-label maps of cal still at the hard-coded prior
// (too few examples to fit), with the reference maps that stand in for them.
func priorMaps(cal, ref *calibrate.Calibration) (mine, theirs []*calibrate.Binary) {
	for _, pair := range [][2]*calibrate.Binary{
		{&cal.CategoriesMulti, &ref.CategoriesMulti}, {&cal.Servers, &ref.Servers}, {&cal.Tools, &ref.Tools},
	} {
		if pair[0].Method == calibrate.MethodPrior {
			mine, theirs = append(mine, pair[0]), append(theirs, pair[1])
		}
	}
	return mine, theirs
}

// NeedsReference reports whether any multi-label map of cal is still the
// hard-coded prior, so that UseReference would change it.
func NeedsReference(cal calibrate.Calibration) bool {
	mine, _ := priorMaps(&cal, &calibrate.Calibration{})
	return len(mine) > 0
}

// UseReference replaces each multi-label map of cal that is still the
// hard-coded prior (too few examples to fit) with the reference map.
func UseReference(cal calibrate.Calibration, ref calibrate.Calibration) calibrate.Calibration {
	mine, theirs := priorMaps(&cal, &ref)
	for i := range mine {
		*mine[i] = *theirs[i]
	}
	return cal
}
