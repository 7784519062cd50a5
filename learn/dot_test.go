package learn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/viterin/vek/vek32"
)

// dotI8 agrees with a float64 reference, whatever the length (the
// assembly's blocks of 32 and 8 and the tail in Go), on both paths.
func TestDotI8(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, simd := range []bool{false, true} {
		if simd && !hasDotI8 {
			continue
		}
		saved := hasDotI8
		hasDotI8 = simd
		for n := 0; n <= 100; n++ {
			for _, extra := range []int{0, 3} {
				q := make([]float32, n)
				x := make([]int8, n+extra)
				var want float64
				for i := range q {
					q[i] = float32(rng.NormFloat64())
					x[i] = int8(rng.IntN(255) - 127)
					want += float64(q[i]) * float64(x[i])
				}
				for i := n; i < len(x); i++ {
					x[i] = 127 // beyond q: never read
				}
				got := float64(dotI8(q, x))
				if math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
					t.Errorf("simd %v, n %d: dotI8 = %g, want %g", simd, n, got, want)
				}
			}
		}
		hasDotI8 = saved
	}
}

// BenchmarkDotI8 is dotI8 over 7,000 stored 384-dimension reports against
// vek32's float32 dot over the same reports dequantized: the cosine scan
// View.Request makes for every request.
func BenchmarkDotI8(b *testing.B) {
	const n, d = 7000, 384
	rng := rand.New(rand.NewPCG(1, 2))
	codes := make([][]int8, n)
	vecs := make([][]float32, n)
	for i := range codes {
		codes[i] = make([]int8, d)
		for j := range codes[i] {
			codes[i][j] = int8(rng.IntN(255) - 127)
		}
		vecs[i] = Dequantize(codes[i])
	}
	q := vecs[0]
	b.Run("int8", func(b *testing.B) {
		for b.Loop() {
			for _, c := range codes {
				_ = dotI8(q, c)
			}
		}
	})
	b.Run("float32", func(b *testing.B) {
		for b.Loop() {
			for _, v := range vecs {
				_ = dotF32(q, v)
			}
		}
	})
}

func dotF32(a, b []float32) float32 { return vek32.Dot(a, b) }
