package calibrate

import (
	"math"
	"sort"
)

// This file holds the small numerical fits behind Fit: temperature scaling
// with an out-of-scope logit (single-label), Platt scaling and isotonic
// regression (multi-label), and expected calibration error. All are
// deterministic.

// ECEBins is the number of equal-width bins every ECE and reliability
// diagram of the project uses (15, as in Guo et al. 2017), so figures
// from fitting, gen-index eval and GetIndexInfo compare.
const ECEBins = 15

// ECE is the expected calibration error over equal-width bins: the
// count-weighted mean |accuracy - mean confidence|.
func ECE(conf []float64, correct []bool, bins int) float64 {
	if len(conf) == 0 || bins <= 0 {
		return 0
	}
	n := make([]float64, bins)
	sc := make([]float64, bins)
	sa := make([]float64, bins)
	for i, c := range conf {
		b := int(c * float64(bins))
		b = max(0, min(bins-1, b))
		n[b]++
		sc[b] += c
		if correct[i] {
			sa[b]++
		}
	}
	var e float64
	for b := range n {
		if n[b] > 0 {
			e += math.Abs(sa[b]-sc[b]) / float64(len(conf))
		}
	}
	return e
}

// softmaxNLL is the mean negative log-likelihood of labels under a
// temperature softmax with an out-of-scope logit; label -1 is out of scope
// and weighs oosWeight.
func softmaxNLL(scores [][]float64, labels []int, T, oos, oosWeight float64) float64 {
	var nll, wsum float64
	for i, s := range scores {
		m := oos / T
		for _, x := range s {
			m = math.Max(m, x/T)
		}
		z := math.Exp(oos/T - m)
		for _, x := range s {
			z += math.Exp(x/T - m)
		}
		var logp float64
		w := 1.0
		if labels[i] < 0 {
			logp = oos/T - m - math.Log(z)
			w = oosWeight
		} else {
			logp = s[labels[i]]/T - m - math.Log(z)
		}
		nll -= w * logp
		wsum += w
	}
	return nll / wsum
}

// golden minimises a unimodal f on [lo, hi].
func golden(f func(float64) float64, lo, hi float64, iters int) float64 {
	const phi = 0.6180339887498949
	a, b := lo, hi
	c, d := b-phi*(b-a), a+phi*(b-a)
	fc, fd := f(c), f(d)
	for i := 0; i < iters; i++ {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - phi*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + phi*(b-a)
			fd = f(d)
		}
	}
	return (a + b) / 2
}

// plattTargets returns Platt's smoothed targets for positives (hi) and
// negatives (lo), and the intercept B that gives the base rate.
func plattTargets(pos []bool) (hi, lo, b0 float64) {
	var np, nn float64
	for _, p := range pos {
		if p {
			np++
		} else {
			nn++
		}
	}
	return (np + 1) / (np + 2), 1 / (nn + 2), math.Log((nn + 1) / (np + 1))
}

// fitPlatt fits p = 1/(1+exp(A*s+B)) on Platt's smoothed targets.
func fitPlatt(s []float64, pos []bool) (A, B float64) {
	zero := make([]float64, len(s))
	A, _, B = fitPlattGap(s, zero, pos)
	return A, B
}

// fitPlattGap fits p = 1/(1+exp(A*s+G*gap+B)) on Platt's smoothed
// targets, where gap is how far the label's score falls below the best
// score of its answer. The score alone says how close a label is to the
// text; the gap says whether a better one is in the answer, which the
// score cannot.
//
// It is Newton's method with a backtracking line search on the
// cross-entropy (Lin, Lin and Weng, "A note on Platt's probabilistic
// outputs", 2007): a full Newton step can overshoot on nearly separable
// samples and run the weights off to ±1e11 (seen with all-MiniLM-L6-v2 on
// the default catalog's servers, where every held-out example's own server
// has gap 0), which maps every score to 0 or 1.
func fitPlattGap(s, gap []float64, pos []bool) (A, G, B float64) {
	hi, lo, b0 := plattTargets(pos)
	target := func(i int) float64 {
		if pos[i] {
			return hi
		}
		return lo
	}
	nll := func(w [3]float64) float64 {
		var sum float64
		for i := range s {
			f := w[0]*s[i] + w[1]*gap[i] + w[2]
			t := target(i)
			// -(t log p + (1-t) log(1-p)) with p = 1/(1+e^f), computed stably.
			if f >= 0 {
				sum += t*f + math.Log1p(math.Exp(-f))
			} else {
				sum += (t-1)*f + math.Log1p(math.Exp(f))
			}
		}
		return sum
	}
	w := [3]float64{0, 0, b0} // A, G, B
	cur := nll(w)
	for it := 0; it < 100; it++ {
		var g [3]float64
		var h [3][3]float64
		for i := range s {
			x := [3]float64{s[i], gap[i], 1}
			p := 1 / (1 + math.Exp(w[0]*x[0]+w[1]*x[1]+w[2]))
			d, v := target(i)-p, p*(1-p)
			for k := 0; k < 3; k++ {
				g[k] += x[k] * d
				for l := 0; l < 3; l++ {
					h[k][l] += x[k] * x[l] * v
				}
			}
		}
		for k := 0; k < 3; k++ {
			h[k][k] += 1e-9
		}
		step, ok := solve3(h, g)
		if !ok {
			break
		}
		// Halve the step until the loss goes down (at most 30 times).
		moved := false
		for t := 1.0; t > 1e-9; t /= 2 {
			var next [3]float64
			for k := range w {
				next[k] = w[k] - t*step[k]
			}
			if n := nll(next); n < cur {
				w, cur, moved = next, n, true
				break
			}
		}
		if !moved || math.Abs(step[0])+math.Abs(step[1])+math.Abs(step[2]) < 1e-9 {
			break
		}
	}
	return w[0], w[1], w[2]
}

// solve3 solves h·x = g by Cramer's rule.
func solve3(h [3][3]float64, g [3]float64) ([3]float64, bool) {
	det := func(m [3][3]float64) float64 {
		return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	}
	d := det(h)
	if d == 0 || math.IsNaN(d) {
		return [3]float64{}, false
	}
	var x [3]float64
	for k := 0; k < 3; k++ {
		m := h
		for r := 0; r < 3; r++ {
			m[r][k] = g[r]
		}
		x[k] = det(m) / d
	}
	return x, true
}

// isotonic is a monotone step map fitted by pool-adjacent-violators,
// interpolated linearly between block centres.
type isotonic struct {
	X []float64 `json:"x"`
	Y []float64 `json:"y"`
}

func fitIsotonic(s []float64, pos []bool) isotonic {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return s[idx[a]] < s[idx[b]] })
	type block struct{ sx, sy, n float64 }
	var st []block
	for _, i := range idx {
		y := 0.0
		if pos[i] {
			y = 1
		}
		st = append(st, block{s[i], y, 1})
		for len(st) > 1 && st[len(st)-2].sy/st[len(st)-2].n >= st[len(st)-1].sy/st[len(st)-1].n {
			a, b := st[len(st)-2], st[len(st)-1]
			st = append(st[:len(st)-2], block{a.sx + b.sx, a.sy + b.sy, a.n + b.n})
		}
	}
	var iso isotonic
	for _, b := range st {
		iso.X = append(iso.X, b.sx/b.n)
		iso.Y = append(iso.Y, b.sy/b.n)
	}
	return iso
}

func (m isotonic) predict(x float64) float64 {
	n := len(m.X)
	if n == 0 {
		return 0.5
	}
	if x <= m.X[0] {
		return m.Y[0]
	}
	if x >= m.X[n-1] {
		return m.Y[n-1]
	}
	i := sort.SearchFloat64s(m.X, x)
	x0, x1, y0, y1 := m.X[i-1], m.X[i], m.Y[i-1], m.Y[i]
	if x1 == x0 {
		return y1
	}
	return y0 + (y1-y0)*(x-x0)/(x1-x0)
}

// minIsotonicPositives is the fewest positive samples for which an
// isotonic map is considered: with fewer, its steps are noise and it
// extrapolates flat past the highest positive score.
const minIsotonicPositives = 200

// ChooseBinary fits Platt and isotonic maps by k-fold cross-validation and
// keeps the one with the lower held-out ECE (Platt unless isotonic is at
// least 10% better: Platt is smoother and extrapolates), refitted on all
// samples. Isotonic is only a candidate with enough positives.
func ChooseBinary(s []float64, pos []bool, folds int, prior Binary, floor float64) Binary {
	return ChooseBinaryGap(s, nil, pos, folds, prior, floor)
}

// ChooseBinaryGap is ChooseBinary with each sample's gap below the best
// score of its answer; with gaps, the Platt candidate is fitPlattGap.
func ChooseBinaryGap(s, gap []float64, pos []bool, folds int, prior Binary, floor float64) Binary {
	out := prior
	n := len(s)
	if n < 2*folds {
		return out
	}
	heldP := make([]float64, n)
	heldI := make([]float64, n)
	for f := 0; f < folds; f++ {
		var ts, tg []float64
		var tp []bool
		for i := 0; i < n; i++ {
			if i%folds != f {
				ts = append(ts, s[i])
				tp = append(tp, pos[i])
				if gap != nil {
					tg = append(tg, gap[i])
				}
			}
		}
		var A, G, B float64
		if gap != nil {
			A, G, B = fitPlattGap(ts, tg, tp)
		} else {
			A, B = fitPlatt(ts, tp)
		}
		iso := fitIsotonic(ts, tp)
		for i := f; i < n; i += folds {
			var g float64
			if gap != nil {
				g = gap[i]
			}
			heldP[i] = 1 / (1 + math.Exp(A*s[i]+G*g+B))
			heldI[i] = iso.predict(s[i])
		}
	}
	raw := make([]float64, n)
	for i, x := range s {
		raw[i] = clamp01(x)
	}
	out.ECEBefore = ECE(raw, pos, ECEBins)
	eP, eI := ECE(heldP, pos, ECEBins), ECE(heldI, pos, ECEBins)
	out.Samples = n
	npos := 0
	for _, p := range pos {
		if p {
			npos++
		}
	}
	if npos >= minIsotonicPositives && n-npos >= minIsotonicPositives && eI < eP*0.9 {
		iso := fitIsotonic(s, pos)
		out.Method, out.Isotonic, out.ECEAfter = "isotonic", &iso, eI
		out.Reliability = Reliability(heldI, pos, ECEBins)
		out.Threshold = recallThreshold(heldI, pos, floor)
		return out
	}
	if gap != nil {
		out.A, out.G, out.B = fitPlattGap(s, gap, pos)
		out.Method, out.Isotonic, out.ECEAfter = "platt-gap", nil, eP
	} else {
		out.G = 0
		out.A, out.B = fitPlatt(s, pos)
		out.Method, out.Isotonic, out.ECEAfter = "platt", nil, eP
	}
	out.Reliability = Reliability(heldP, pos, ECEBins)
	out.Threshold = recallThreshold(heldP, pos, floor)
	return out
}

// targetRecall is the share of held-out relevant labels the default
// multi-label threshold keeps: routing should rather show one tool too many
// than hide the one that was needed.
const targetRecall = 0.85

// recallThreshold is the held-out probability that keeps targetRecall of
// the positives, within [floor, 0.5].
func recallThreshold(held []float64, pos []bool, floor float64) float64 {
	var ps []float64
	for i, p := range pos {
		if p {
			ps = append(ps, held[i])
		}
	}
	if len(ps) == 0 {
		return 0.5
	}
	sort.Float64s(ps)
	t := ps[int(float64(len(ps))*(1-targetRecall))]
	return math.Round(math.Max(floor, math.Min(0.5, t))*1000) / 1000
}

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// Bin is one bin of a reliability diagram.
type Bin struct {
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
	Count    int     `json:"count"`
	MeanConf float64 `json:"mean_confidence"`
	Accuracy float64 `json:"accuracy"`
}

// Reliability bins confidences into equal-width bins with their accuracy.
func Reliability(conf []float64, correct []bool, bins int) []Bin {
	out := make([]Bin, bins)
	for b := range out {
		out[b].Lo, out[b].Hi = float64(b)/float64(bins), float64(b+1)/float64(bins)
	}
	for i, c := range conf {
		b := max(0, min(bins-1, int(c*float64(bins))))
		out[b].Count++
		out[b].MeanConf += c
		if correct[i] {
			out[b].Accuracy++
		}
	}
	for b := range out {
		if n := float64(out[b].Count); n > 0 {
			out[b].MeanConf /= n
			out[b].Accuracy /= n
		}
	}
	return out
}
