package classify

import (
	"context"
	"math"
	"strings"

	"github.com/classifierd/classifierd/index"
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
}

// Fit fits the calibration of idx on the index's own examples: each
// example vector is scored as a query with itself masked out (leave-one-out
// cross-validation without re-embedding), and, for the out-of-scope mass,
// once more with its whole label masked out, which is what a query for a
// label the catalog lacks looks like. Targets without enough examples keep
// the prior and say so.
func Fit(ctx context.Context, idx *index.Index, opts FitOptions) (Calibration, error) {
	if opts.MinExamples <= 0 {
		opts.MinExamples = 1
	}
	if opts.Folds <= 0 {
		opts.Folds = 5
	}
	c, err := New(idx, nil, Config{})
	if err != nil {
		return Calibration{}, err
	}
	cal := DefaultCalibration()
	cal.Fitted = true
	c.cal = cal // fit on the fusion weights the daemon will use
	if opts.DescriptionsOnly {
		c.exampleMask = allExamples(idx)
		c.setCentroids(true)
	}

	catEx := examplesOf(idx, c.cats)
	toolEx := examplesOf(idx, c.tools)
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
	var multiS []float64
	var multiPos []bool
	dots := make([]float32, idx.NumVectors())
	catPos := map[int]int{}
	for j, li := range c.cats {
		catPos[li] = j
	}
	for _, ex := range catEx {
		if err := ctx.Err(); err != nil {
			return Calibration{}, err
		}
		t := c.exampleTurn(ex, dots, false)
		cs := c.categoryScores([]turn{t})
		inScores = append(inScores, rawScores(cs))
		inLabels = append(inLabels, catPos[ex.label])
		inVec = append(inVec, ex.vector)
		for _, s := range cs {
			multiS = append(multiS, s.score)
			multiPos = append(multiPos, s.label == ex.label)
		}
		t = c.exampleTurn(ex, dots, true)
		inScores = append(inScores, rawScores(c.categoryScores([]turn{t})))
		inLabels = append(inLabels, -1)
		inVec = append(inVec, ex.vector)
		tick()
	}
	if len(catEx) >= 2*opts.MinExamples {
		if head, oof := c.fitHead(ctx, opts.Folds); head != nil {
			if w := chooseHeadWeight(inScores, inLabels, inVec, oof); w > 0 {
				cal.Head, cal.HeadWeight = head, w
				for i := range inScores {
					for j, lp := range oof[inVec[i]] {
						inScores[i][j] += w * lp
					}
				}
			}
		}
		cal.Categories = fitSingle(inScores, inLabels, opts.Folds, cal.Categories.InScope)
		cal.CategoriesMulti = chooseBinary(multiS, multiPos, opts.Folds, cal.CategoriesMulti, labelFloor)
		cal.CategoriesMulti.SharedFallback = fewExamples(idx, c.cats, opts.MinExamples)
	}

	// Tool fusion weights, where there are enough tool examples to tell.
	if !opts.DescriptionsOnly && len(toolEx) >= minFusionExamples*len(c.tools) && len(c.tools) > 1 {
		if err := c.fitToolFusion(ctx, toolEx, dots); err != nil {
			return Calibration{}, err
		}
		cal.Fusion = c.cal.Fusion
		cal.FusionFitted = true
	}

	// Servers and tools: multi-label, from tool examples.
	var srvS, toolS, srvGap, toolGap []float64
	var srvPos, toolPos []bool
	all := c.allServers()
	for _, ex := range toolEx {
		if err := ctx.Err(); err != nil {
			return Calibration{}, err
		}
		t := c.exampleTurn(ex, dots, false)
		ss, ts, _, _ := c.routeScores([]turn{t}, all)
		own := c.serverOf[ex.label]
		for _, s := range ss {
			srvS = append(srvS, s.score)
			srvGap = append(srvGap, ss[0].score-s.score)
			srvPos = append(srvPos, s.label == own)
		}
		// Tools are fitted where Route decides about them: among the
		// best-ranked candidates. Fitted over every tool of the catalog,
		// the map learns the base rate of a random tool (1 in N) and
		// under-states the confidence of the tools Route returns (make
		// eval, default catalog, ECE over returned tools: 0.108 fitted on
		// every tool, 0.053 on the best 5; for servers, fitting on every
		// server measured better, 0.053 against 0.069).
		for _, s := range ts[:min(len(ts), fitTop)] {
			toolS = append(toolS, s.score)
			toolGap = append(toolGap, ts[0].score-s.score)
			toolPos = append(toolPos, s.label == ex.label)
		}
		tick()
	}
	if len(toolEx) >= 2*opts.MinExamples {
		cal.Servers = chooseBinaryGap(srvS, srvGap, srvPos, opts.Folds, cal.Servers, labelFloor)
		cal.Tools = chooseBinaryGap(toolS, toolGap, toolPos, opts.Folds, cal.Tools, toolFloor)
		cal.Tools.SharedFallback = fewExamples(idx, c.tools, opts.MinExamples)
	}
	return cal, nil
}

// Floors of the default multi-label thresholds. Categories and servers
// decide what is shown at all; a tool is only considered inside a selected
// server, where ranking matters more than its own threshold.
const (
	labelFloor = 0.2
	toolFloor  = 0.01
)

// fitTop is how many of the best-ranked tools per held-out example the
// tool map is fitted on.
const fitTop = 5

// example is one example vector of a label.
type example struct {
	label, vector int
}

// allExamples lists the example vectors of every label.
func allExamples(idx *index.Index) []example {
	labels := make([]int, len(idx.Labels))
	for i := range labels {
		labels[i] = i
	}
	return examplesOf(idx, labels)
}

func examplesOf(idx *index.Index, labels []int) []example {
	var out []example
	for _, li := range labels {
		l := &idx.Labels[li]
		for k, src := range l.Sources {
			if src == index.SourceExample {
				out = append(out, example{label: li, vector: l.First + k})
			}
		}
	}
	return out
}

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

// exampleTurn scores an example vector as if it were a query, with itself
// (or, for an out-of-scope sample, its whole label) masked out.
func (c *Classifier) exampleTurn(ex example, dots []float32, maskLabel bool) turn {
	_ = c.idx.Dot(c.idx.Vector(ex.vector), dots)
	d := append([]float32(nil), dots...)
	l := &c.idx.Labels[ex.label]
	if maskLabel {
		for v := l.First; v < l.First+l.Count; v++ {
			d[v] = float32(math.Inf(-1))
		}
	} else {
		d[ex.vector] = float32(math.Inf(-1))
	}
	for _, m := range c.exampleMask {
		d[m.vector] = float32(math.Inf(-1))
	}
	text := l.Texts[ex.vector-l.First]
	t := turn{text: text, weight: 1, dots: d, lower: strings.ToLower(text),
		vec: c.idx.Vector(ex.vector), held: true, heldVec: ex.vector}
	if c.cal.Fusion.BM25 > 0 {
		t.bm = c.bm.score(text) // examples are not in the BM25 documents
	}
	if c.cal.Fusion.ExampleBM25 > 0 {
		t.exBM = c.exBM.score(text, ex.vector)
	}
	return t
}

func rawScores(cs []labelScore) []float64 {
	out := make([]float64, len(cs))
	for i, s := range cs {
		out[i] = s.score
	}
	return out
}

// oosWeight is the weight of simulated out-of-scope samples against
// in-scope ones when fitting the out-of-scope logit.
// oosLogit fixes the out-of-scope logit of the label softmax low: the
// softmax answers "which label, if any fits", and InScope answers "does any".
const oosLogit = -10

// fitSingle fits the single-label temperature softmax and picks the
// abstain threshold that best balances in-scope accuracy against abstain
// recall on the fitting samples, within [0.3, 0.7].
func fitSingle(scores [][]float64, labels []int, folds int, prior Binary) SingleLabel {
	var in [][]float64
	var inLabels []int
	var top []float64
	var isIn []bool
	for i, s := range scores {
		best := math.Inf(-1)
		for _, x := range s {
			best = math.Max(best, x)
		}
		top = append(top, best)
		isIn = append(isIn, labels[i] >= 0)
		if labels[i] >= 0 {
			in = append(in, s)
			inLabels = append(inLabels, labels[i])
		}
	}
	T := fitT(in, inLabels)
	sl := SingleLabel{Method: "temperature", T: T, OOS: oosLogit}
	sl.InScope = chooseBinary(top, isIn, folds, prior, labelFloor)
	var confB, confA []float64
	var correct []bool
	for i, s := range scores {
		p := sl.Probabilities(s)
		best := 0
		for j := range p {
			if p[j] > p[best] {
				best = j
			}
		}
		if labels[i] < 0 {
			continue
		}
		confB = append(confB, clamp01(s[best]))
		confA = append(confA, p[best])
		correct = append(correct, best == labels[i])
	}
	sl.ECEBefore, sl.ECEAfter, sl.Samples = ECE(confB, correct, 15), ECE(confA, correct, 15), len(scores)
	sl.Threshold = pickThreshold(scores, labels, sl)
	return sl
}

// maxAccuracyLoss is how much in-scope accuracy the default abstain
// threshold may give up to catch out-of-scope requests.
const maxAccuracyLoss = 0.05

// pickThreshold chooses the default abstain threshold on the joint
// probability p(label right | in scope) × p(in scope): the highest one that
// keeps in-scope accuracy within maxAccuracyLoss of never abstaining, on
// the fitting samples (held-out examples and held-out labels).
func pickThreshold(scores [][]float64, labels []int, sl SingleLabel) float64 {
	type sample struct {
		joint float64
		right bool
	}
	var in []sample
	var nRight int
	for i, s := range scores {
		if labels[i] < 0 {
			continue
		}
		p := sl.Probabilities(s)
		best := 0
		for j := range p {
			if p[j] > p[best] {
				best = j
			}
		}
		r := best == labels[i]
		if r {
			nRight++
		}
		in = append(in, sample{joint: p[best] * sl.InScope.Prob(s[best]), right: r})
	}
	if len(in) == 0 {
		return 0.5
	}
	floor := float64(nRight)/float64(len(in)) - maxAccuracyLoss
	best := 0.05
	for t := 0.05; t <= 0.9001; t += 0.01 {
		keep := 0
		for _, x := range in {
			if x.right && x.joint >= t {
				keep++
			}
		}
		if float64(keep)/float64(len(in)) < floor {
			break
		}
		best = math.Round(t*100) / 100
	}
	return best
}

// FitTemperature fits the temperature of a softmax over per-label scores
// by minimising the negative log-likelihood of the true labels (golden
// section search on a log scale).
func FitTemperature(scores [][]float64, labels []int) float64 { return fitT(scores, labels) }

// Softmax returns exp(s/T) normalised over the scores.
func Softmax(scores []float64, T float64) []float64 {
	return SingleLabel{T: T, OOS: oosLogit}.Probabilities(scores)
}

// fitT fits the softmax temperature on in-scope samples.
func fitT(scores [][]float64, labels []int) float64 {
	logT := golden(func(x float64) float64 { return softmaxNLL(scores, labels, math.Exp(x), oosLogit, 0) }, math.Log(0.002), math.Log(2), 60)
	return math.Exp(logT)
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
func (c *Classifier) fitHead(ctx context.Context, folds int) (*Head, map[int][]float64) {
	var x [][]float32
	var y, vi []int
	for j, li := range c.cats {
		l := &c.idx.Labels[li]
		for v := l.First; v < l.First+l.Count; v++ {
			x = append(x, c.idx.Vector(v))
			y = append(y, j)
			vi = append(vi, v)
		}
	}
	if len(c.cats) < minHeadCategories || len(x) < minHeadExamples*len(c.cats) {
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
		h := TrainHead(tx, ty, len(c.cats), HeadOptions{Seed: int64(f)})
		for i := f; i < len(x); i += folds {
			oof[vi[i]] = h.LogProbs(x[i])
		}
	}
	return TrainHead(x, y, len(c.cats), HeadOptions{Seed: 99}), oof
}

// headWeights are the candidate weights of the head's log-probabilities.
var headWeights = []float64{0, 0.005, 0.01, 0.02, 0.04, 0.08}

// chooseHeadWeight picks the weight with the best held-out accuracy on the
// in-scope samples (the smaller weight on ties).
func chooseHeadWeight(scores [][]float64, labels, vec []int, oof map[int][]float64) float64 {
	best, bestAcc := 0.0, -1.0
	for _, w := range headWeights {
		right, n := 0, 0
		for i, s := range scores {
			if labels[i] < 0 {
				continue
			}
			lp := oof[vec[i]]
			arg, max := -1, math.Inf(-1)
			for j, x := range s {
				if lp != nil {
					x += w * lp[j]
				}
				if x > max {
					arg, max = j, x
				}
			}
			n++
			if arg == labels[i] {
				right++
			}
		}
		if acc := float64(right) / math.Max(1, float64(n)); acc > bestAcc+1e-9 {
			best, bestAcc = w, acc
		}
	}
	return best
}

// minFusionExamples is the average number of examples per tool from which
// gen-index fits the tool fusion weights instead of keeping the defaults.
const minFusionExamples = 2

// maxFusionExamples bounds the held-out examples the weights are chosen on.
const maxFusionExamples = 2000

// fusionKnob is one fitted tool fusion weight and its candidate values
// (the default first where it is one of them).
type fusionKnob struct {
	name   string
	field  func(*Fusion) *float64
	values []float64
}

var fusionKnobs = []fusionKnob{
	{"tool_centroid", func(f *Fusion) *float64 { return &f.ToolCentroid }, []float64{0.5, 0.3, 0.7}},
	{"bm25", func(f *Fusion) *float64 { return &f.BM25 }, []float64{0.018, 0.012, 0.024}},
	{"tool_breadth", func(f *Fusion) *float64 { return &f.ToolBreadth }, []float64{0, 0.1, 0.2, 0.3, 0.4}},
	{"example_bm25", func(f *Fusion) *float64 { return &f.ExampleBM25 }, []float64{0, 0.005, 0.01, 0.015}},
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
func (c *Classifier) fitToolFusion(ctx context.Context, toolEx []example, dots []float32) error {
	all := c.allServers()
	if len(toolEx) > maxFusionExamples { // bound time and memory: an even sample
		sample := make([]example, 0, maxFusionExamples)
		for i := 0; i < maxFusionExamples; i++ {
			sample = append(sample, toolEx[i*len(toolEx)/maxFusionExamples])
		}
		toolEx = sample
	}
	turns := make([]turn, len(toolEx))
	for i, ex := range toolEx {
		turns[i] = c.exampleTurn(ex, dots, false)
		// The candidates turn example BM25 on whatever the current weight.
		turns[i].exBM = c.exBM.score(turns[i].text, ex.vector)
	}
	mrr := func(f Fusion) float64 {
		c.cal.Fusion = f
		var sum float64
		for i, ex := range toolEx {
			_, ts, _, _ := c.routeScores(turns[i:i+1], all)
			for r, s := range ts {
				if s.label == ex.label {
					sum += 1 / float64(r+1)
					break
				}
			}
		}
		return sum / float64(len(toolEx))
	}
	best := c.cal.Fusion
	bestMRR := mrr(best)
	for round := 0; round < maxFusionRounds; round++ {
		changed := false
		for _, k := range fusionKnobs {
			for _, v := range k.values {
				if err := ctx.Err(); err != nil {
					return err
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
	c.cal.Fusion = best
	return nil
}

// ReferencePrior fits, on a reference index (a catalog with examples,
// embedded by the same model), the maps that stand in for a catalog
// without examples: each reference example is scored against descriptions
// and names alone (FitOptions.DescriptionsOnly), which is what a request
// meets in a description-only catalog. A hard-coded prior would say what
// a score means for one model only; this learns it for the model that
// built the index. The returned maps say method "reference/<method>".
func ReferencePrior(ctx context.Context, ref *index.Index) (Calibration, error) {
	cal, err := Fit(ctx, ref, FitOptions{DescriptionsOnly: true})
	if err != nil {
		return Calibration{}, err
	}
	for _, b := range []*Binary{&cal.CategoriesMulti, &cal.Servers, &cal.Tools} {
		if b.Method != "prior" {
			b.Method = "reference/" + b.Method
		}
		b.SharedFallback = nil
	}
	return cal, nil
}

// UseReference replaces each multi-label map of cal that is still the
// hard-coded prior (too few examples to fit) with the reference map.
func UseReference(cal Calibration, ref Calibration) Calibration {
	out := cal
	if out.CategoriesMulti.Method == "prior" {
		out.CategoriesMulti = ref.CategoriesMulti
	}
	if out.Servers.Method == "prior" {
		out.Servers = ref.Servers
	}
	if out.Tools.Method == "prior" {
		out.Tools = ref.Tools
	}
	return out
}
