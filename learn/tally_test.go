package learn

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// nearest keeps the n records nearest by cosine among those kept, as a
// full sort would.
func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 5, 100, 2000} {
		cos := make([]float64, size)
		for i := range cos {
			cos[i] = r.Float64()*2 - 1
		}
		keep := func(i int) bool { return i%3 != 0 }
		for _, n := range []int{1, 7, 512} {
			got := nearest(cos, n, keep)
			var want []int
			for i := range cos {
				if keep(i) {
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
