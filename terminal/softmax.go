package terminal

import "math"

// floorLogit is a fixed extra logit in the class softmax, an "other"
// class no example stands for. It keeps the probabilities of the real
// classes below 1 when every cosine is low. The value and the arithmetic
// below are the ones classify uses for its label softmax, so fitted
// temperatures and confidences did not change when terminal stopped
// importing classify.
const floorLogit = -10

// softmax returns exp(s/T) normalised over the scores and the floor logit.
func softmax(scores []float64, T float64) []float64 {
	out := make([]float64, len(scores))
	m := floorLogit / T
	for _, s := range scores {
		m = math.Max(m, s/T)
	}
	z := math.Exp(floorLogit/T - m)
	for i, s := range scores {
		out[i] = math.Exp(s/T - m)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// fitTemperature returns the softmax temperature in [0.002, 2] that
// minimises the mean negative log-likelihood of the true classes
// (golden-section search on log T).
func fitTemperature(scores [][]float64, labels []int) float64 {
	nll := func(logT float64) float64 {
		T := math.Exp(logT)
		var sum float64
		for i, s := range scores {
			m := floorLogit / T
			for _, x := range s {
				m = math.Max(m, x/T)
			}
			z := math.Exp(floorLogit/T - m)
			for _, x := range s {
				z += math.Exp(x/T - m)
			}
			sum -= s[labels[i]]/T - m - math.Log(z)
		}
		return sum / float64(len(scores))
	}
	return math.Exp(goldenMin(nll, math.Log(0.002), math.Log(2), 60))
}

// goldenMin minimises a unimodal f on [lo, hi] by golden-section search.
func goldenMin(f func(float64) float64, lo, hi float64, iters int) float64 {
	const phi = 0.6180339887498949 // 1/golden ratio
	a, b := lo, hi
	c, d := b-phi*(b-a), a+phi*(b-a)
	fc, fd := f(c), f(d)
	for range iters {
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
