package calibrate

// BestF1Size returns how many of the candidates, ordered by their
// probability of being needed p (best first), to answer with: the k ≤ maxK
// whose set maximises the expected F1 against the needed servers, the
// needs taken as independent (Nan Ye et al. 2012, "Optimizing F-measures:
// a tale of two approaches": under independence the best set is a prefix
// of the probability order). F1 of an empty answer is 1 when nothing is
// needed and 0 otherwise, so a request that plausibly needs nothing gets
// the empty set, and the router's no-match policy.
//
// The expectation is exact: X, the needed servers among the first k, and
// Y, those after them, are independent Poisson-binomial counts, and
// E[F1] = Σ P(X=x)·P(Y=y)·2x/(k+x+y). Candidates are few (tens), so this
// costs O(n³) multiply-adds.
func BestF1Size(p []float64, maxK int) int {
	n := len(p)
	if n == 0 {
		return 0
	}
	// suffix[k] is the distribution of Y over p[k:].
	suffix := make([][]float64, n+1)
	suffix[n] = []float64{1}
	for k := n - 1; k >= 0; k-- {
		suffix[k] = addBernoulli(suffix[k+1], p[k])
	}
	best, bestK := suffix[0][0], 0 // the empty set: F1 is 1 only when nothing is needed
	prefix := []float64{1}
	for k := 1; k <= min(n, maxK); k++ {
		prefix = addBernoulli(prefix, p[k-1])
		var e float64
		for x := 1; x < len(prefix); x++ {
			if prefix[x] == 0 {
				continue
			}
			var inner float64
			for y, py := range suffix[k] {
				inner += py * 2 * float64(x) / float64(k+x+y)
			}
			e += prefix[x] * inner
		}
		if e > best+1e-12 {
			best, bestK = e, k
		}
	}
	return bestK
}

// addBernoulli returns the distribution of a count after adding one
// Bernoulli(q) to a count distributed as dist.
func addBernoulli(dist []float64, q float64) []float64 {
	out := make([]float64, len(dist)+1)
	for i, d := range dist {
		out[i] += d * (1 - q)
		out[i+1] += d * q
	}
	return out
}
