package calibrate

import "math"

// This file holds the fits of one calibration target from scored samples:
// the single-label softmax with its in-scope map and abstain threshold, and
// the weight of the linear head. Package fit collects the samples.

// LabelFloor and ToolFloor are the floors of the default multi-label thresholds. Categories and servers
// decide what is shown at all; a tool is only considered inside a selected
// server, where ranking matters more than its own threshold.
const (
	LabelFloor = 0.2
	ToolFloor  = 0.01
)

// in-scope ones when fitting the out-of-scope logit.
// oosLogit fixes the out-of-scope logit of the label softmax low: the
// softmax answers "which label, if any fits", and InScope answers "does any".
const oosLogit = -10

// FitSingle fits the single-label temperature softmax and picks the
// abstain threshold that best balances in-scope accuracy against abstain
// recall on the fitting samples, within [0.3, 0.7].
func FitSingle(scores [][]float64, labels []int, folds int, prior Binary) SingleLabel {
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
	sl.InScope = ChooseBinary(top, isIn, folds, prior, LabelFloor)
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
	sl.ECEBefore, sl.ECEAfter, sl.Samples = ECE(confB, correct, ECEBins), ECE(confA, correct, ECEBins), len(scores)
	sl.Reliability = Reliability(confA, correct, ECEBins)
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

// headWeights are the candidate weights of the head's log-probabilities.
var headWeights = []float64{0, 0.005, 0.01, 0.02, 0.04, 0.08}

// ChooseHeadWeight picks the weight with the best held-out accuracy on the
// in-scope samples (the smaller weight on ties).
func ChooseHeadWeight(scores [][]float64, labels, vec []int, oof map[int][]float64) float64 {
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
