package learn

// dotI8Go is Σ q[i]·x[i], x as long as q, in Go.
func dotI8Go(q []float32, x []int8) float32 {
	x = x[:len(q)]
	var s float32
	for i, v := range q {
		s += v * float32(x[i])
	}
	return s
}
