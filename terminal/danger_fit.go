package terminal

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/optimize"
)

// DangerSample is one labelled capture as the danger model sees it: its
// evidence, whether it is dangerous, and its group (the family or program
// that leave-one-out holds out).
type DangerSample struct {
	Name      string
	Program   string
	Group     string
	X         []float64
	Dangerous bool
	// Waiting: the program was waiting. Only waiting samples are fitted
	// (danger is judged only for a detected prompt); the others count in
	// the false-positive rate's denominator, as in the evaluation.
	Waiting bool
}

// DangerSampleOf makes the sample of a capture: the evidence of its
// candidate prompt (found as Detect finds it) with its labelled type.
func DangerSampleOf(c Capture, group string) DangerSample {
	typ := ""
	if c.Waiting {
		typ = c.Type
	}
	in := promptEvidence(c.Raw, typ, Hints{CommandLine: c.Command, Program: c.Program})
	x, _ := in.features()
	return DangerSample{Name: c.Name, Program: c.Program, Group: group, X: x, Dangerous: c.Label.Dangerous, Waiting: c.Waiting}
}

// FitDanger fits the logistic model on samples by maximum a posteriori:
// log loss plus a Gaussian prior of strength lambda centred on the hand-set
// prior weights (so evidence the samples never show keeps its prior),
// minimised with gonum's L-BFGS, over the waiting samples. threshold is the
// probability at which a prompt is called dangerous.
func FitDanger(all []DangerSample, lambda, threshold float64) (*DangerModel, error) {
	var samples []DangerSample
	for _, s := range all {
		if s.Waiting {
			samples = append(samples, s)
		}
	}
	prior := priorModel()
	n := len(dangerEvidence)
	mu := make([]float64, 0, n+1)
	for _, w := range prior.Weights {
		mu = append(mu, w.Weight)
	}
	mu = append(mu, prior.Bias)
	p := optimize.Problem{
		Func: func(w []float64) float64 {
			f := 0.0
			for _, s := range samples {
				z := w[n]
				for i, v := range s.X {
					z += w[i] * v
				}
				// log(1+e^z) - y z, computed stably.
				f += softplus(z)
				if s.Dangerous {
					f -= z
				}
			}
			for i := range w {
				d := w[i] - mu[i]
				f += lambda / 2 * d * d
			}
			return f
		},
		Grad: func(g, w []float64) {
			for i := range g {
				g[i] = lambda * (w[i] - mu[i])
			}
			for _, s := range samples {
				z := w[n]
				for i, v := range s.X {
					z += w[i] * v
				}
				r := 1 / (1 + math.Exp(-z))
				if s.Dangerous {
					r--
				}
				for i, v := range s.X {
					g[i] += r * v
				}
				g[n] += r
			}
		},
	}
	res, err := optimize.Minimize(p, append([]float64(nil), mu...), &optimize.Settings{GradientThreshold: 1e-6}, &optimize.LBFGS{})
	if err != nil && (res == nil || !nearlyStationary(p, res.X)) {
		// A line search that cannot improve further at a point where the
		// gradient is already negligible has converged in all but name.
		return nil, fmt.Errorf("terminal: fit danger model: %w", err)
	}
	m := &DangerModel{Weights: prior.Weights, Bias: round4(res.X[n]), Threshold: threshold}
	for i := range m.Weights {
		m.Weights[i].Weight = round4(res.X[i])
	}
	return m, nil
}

// nearlyStationary reports whether the gradient at w is negligible.
func nearlyStationary(p optimize.Problem, w []float64) bool {
	g := make([]float64, len(w))
	p.Grad(g, w)
	norm := 0.0
	for _, v := range g {
		norm += v * v
	}
	return math.Sqrt(norm) < 1e-3
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

func softplus(z float64) float64 {
	if z > 30 {
		return z
	}
	return math.Log1p(math.Exp(z))
}

// dangerLambdas are the prior strengths leave-one-group-out chooses among.
var dangerLambdas = []float64{0.1, 0.3, 1, 3, 10, 30, 100}

// DangerThreshold is the danger_confidence at which a prompt is called
// dangerous. It is a cost, not a fitted setting: with a calibrated
// probability p, calling a prompt dangerous costs (1-p)·c_fp and not
// calling it p·c_fn, so the cheaper call changes at p = c_fp/(c_fp+c_fn).
// A missed dangerous prompt (an agent typing "y" to an overwrite) is taken
// to cost twice a needless confirmation: 1/3.
const DangerThreshold = 1.0 / 3

// ChooseDanger chooses the prior's strength by leave-one-group-out on
// samples alone: each group is predicted by a model fitted on the others,
// and lambda minimises the held-out log loss. The threshold is
// DangerThreshold.
func ChooseDanger(samples []DangerSample) (lambda, threshold float64, err error) {
	losses, err := DangerPriorCurve(samples, dangerLambdas)
	if err != nil {
		return 0, 0, err
	}
	bestLoss := math.Inf(1)
	for i, l := range dangerLambdas {
		if losses[i] < bestLoss {
			bestLoss, lambda = losses[i], l
		}
	}
	return lambda, DangerThreshold, nil
}

// DangerPriorCurve is, for each prior strength in lambdas, the mean
// held-out log loss per waiting sample: each group predicted by a model
// fitted on the others (less the group's programs). It is what
// ChooseDanger minimises, for a report of how sharply the data choose.
func DangerPriorCurve(samples []DangerSample, lambdas []float64) ([]float64, error) {
	out := make([]float64, len(lambdas))
	for li, l := range lambdas {
		probs, err := heldOutProbabilities(samples, l)
		if err != nil {
			return nil, err
		}
		loss, n := 0.0, 0
		for i, s := range samples {
			if !s.Waiting {
				continue
			}
			n++
			p := math.Min(math.Max(probs[i], 1e-6), 1-1e-6)
			if s.Dangerous {
				loss -= math.Log(p)
			} else {
				loss -= math.Log(1 - p)
			}
		}
		out[li] = loss / float64(max(n, 1))
	}
	return out, nil
}

// heldOutProbabilities predicts every sample with a model fitted on the
// samples of the other groups, less any sample of a program the held-out
// group has.
func heldOutProbabilities(samples []DangerSample, lambda float64) ([]float64, error) {
	out := make([]float64, len(samples))
	for _, g := range groupsOf(samples) {
		m, err := FitDanger(trainingFor(samples, g), lambda, 0.5)
		if err != nil {
			return nil, err
		}
		for i, s := range samples {
			if s.Group == g {
				out[i] = m.probability(s.X)
			}
		}
	}
	return out, nil
}

func groupsOf(samples []DangerSample) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range samples {
		if !seen[s.Group] {
			seen[s.Group] = true
			out = append(out, s.Group)
		}
	}
	sort.Strings(out)
	return out
}

// trainingFor is samples less group g and less every program g has.
func trainingFor(samples []DangerSample, g string) []DangerSample {
	held := map[string]bool{}
	for _, s := range samples {
		if s.Group == g {
			held[s.Program] = true
		}
	}
	var out []DangerSample
	for _, s := range samples {
		if s.Group != g && !held[s.Program] {
			out = append(out, s)
		}
	}
	return out
}

// FitDangerHeldOut is the whole procedure on samples: choose the settings
// by leave-one-group-out, then fit on all of them.
func FitDangerHeldOut(samples []DangerSample) (*DangerModel, error) {
	lambda, threshold, err := ChooseDanger(samples)
	if err != nil {
		return nil, err
	}
	m, err := FitDanger(samples, lambda, threshold)
	if err != nil {
		return nil, err
	}
	m.Fit.Lambda = lambda
	return m, nil
}

// DangerLambdas are the prior strengths ChooseDanger chooses among.
func DangerLambdas() []float64 { return append([]float64(nil), dangerLambdas...) }
