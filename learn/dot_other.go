//go:build !amd64

package learn

// dotI8 is Σ q[i]·x[i] over the shorter of q and x.
func dotI8(q []float32, x []int8) float32 {
	n := min(len(q), len(x))
	return dotI8Go(q[:n], x[:n])
}
