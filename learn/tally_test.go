package learn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// A ranking's nearest are the n records nearest by cosine among those
// weighing anything and kept, as a full sort would have them, whether its
// first cut holds enough of them or it has to widen (few kept, or a
// small want), and none at or past the cosine stop ends the walk at.
func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 5, 100, 2000} {
		cos := make([]float64, size)
		for i := range cos {
			cos[i] = r.Float64()*2 - 1
		}
		w := make([]float64, size)
		for i := range w {
			if i%7 != 0 {
				w[i] = 1
			}
		}
		keep := func(i int) bool { return i%3 != 0 }
		rare := func(i int) bool { return i%50 == 1 }
		stop := func(c float64) bool { return c <= -0.5 }
		for _, tc := range []struct {
			n, want int
			keep    func(int) bool
		}{{1, 64, keep}, {7, 64, keep}, {512, 64, keep}, {512, 2048, keep}, {512, 2048, rare}, {7, 1, rare}} {
			n := tc.n
			got := newRanking(cos, w, tc.want).nearest(n, tc.keep, stop)
			var want []int
			for i := range cos {
				if w[i] > 0 && tc.keep(i) && !stop(cos[i]) {
					want = append(want, i)
				}
			}
			slices.SortFunc(want, func(a, b int) int {
				switch {
				case cos[a] > cos[b]:
					return -1
				case cos[a] < cos[b]:
					return 1
				}
				return 0
			})
			want = want[:min(n, len(want))]
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("size %d, n %d: nearest %v, want %v", size, n, got, want)
			}
		}
	}
}

// descKey orders cosines as a descending sort would, ties alike, across
// signs and zeros.
func TestDescKey(t *testing.T) {
	cs := []float32{1, 0.5, 0.25, 1e-30, 0, -1e-30, -0.25, -0.5, -1}
	for i := 1; i < len(cs); i++ {
		if !(descKey(cs[i-1]) < descKey(cs[i])) {
			t.Errorf("descKey(%g) = %#x, not below descKey(%g) = %#x", cs[i-1], descKey(cs[i-1]), cs[i], descKey(cs[i]))
		}
	}
	if negZero := float32(math.Copysign(0, -1)); descKey(negZero) != descKey(0) {
		t.Error("-0 and 0, different keys")
	}
}
