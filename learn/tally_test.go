package learn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// A ranking's nearest are the n records nearest by cosine among those
// weighing anything and kept by the tally asked, as a full sort would
// have them, for every tally of one ranking (one keeping most records,
// one few, one every record), whether the tally's cut holds enough of
// them or the ranking has to widen (n above the want it was made for),
// and none at or past the cosine stop ends the walk at.
func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 5, 100, 2000} {
		cos := make([]float64, size)
		idents := make([]int, size) // each record its own identity
		for i := range cos {
			cos[i] = r.Float64()*2 - 1
			idents[i] = i
		}
		w := make([]float64, size)
		for i := range w {
			if i%7 != 0 {
				w[i] = 1
			}
		}
		keepFns := []func(i int) bool{
			func(i int) bool { return i%3 != 0 },
			func(i int) bool { return i%50 == 1 },
			func(int) bool { return true },
		}
		keeps := make([][]bool, len(keepFns))
		for g, keep := range keepFns {
			keeps[g] = make([]bool, size)
			for i := range keeps[g] {
				keeps[g][i] = keep(i)
			}
		}
		for _, tc := range []struct {
			n, want int
			at      float64
		}{{1, 64, -0.5}, {7, 64, -0.5}, {512, 64, -0.5}, {512, 2048, -0.5}, {7, 1, -0.5}, {512, 512, -0.5},
			{512, 64, 0.3}, {512, 64, 0.9}, {64, 16, 0.9}, {512, 512, 0.95}} {
			stop := func(c float64) bool { return c <= tc.at }
			rk := newRanking(cos, w, idents, keeps, tc.want)
			for g, keep := range keepFns {
				n := tc.n
				got := rk.nearest(g, n, stop)
				var want []int
				for i := range cos {
					if w[i] > 0 && keep(i) && !stop(cos[i]) {
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
					return a - b
				})
				want = want[:min(n, len(want))]
				if !slices.Equal(got, want) {
					t.Errorf("size %d, n %d, want %d, stop %g, tally %d: nearest %v, want %v", size, n, tc.want, tc.at, g, got, want)
				}
			}
		}
	}
}

// A tally's walk ends at its cut: below it the order holds only what
// other tallies took, so a record there must neither be taken nor end
// the walk at the cosine stop while the tally's own nearer ones below
// its cut were left out.
func TestNearestEndsAtCut(t *testing.T) {
	// Identity 0's records at 0.9 and 0.5, identity 2's at 0.1; tally 0
	// keeps identities 0 and 2, tally 1 identities 1 and 2.
	cos, w, idents := []float64{0.9, 0.5, 0.1}, []float64{1, 1, 1}, []int{0, 0, 2}
	keeps := [][]bool{{true, false, true}, {false, true, true}}
	rk := newRanking(cos, w, idents, keeps, 1)
	if got := rk.nearest(0, 2, func(c float64) bool { return c <= 0.3 }); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("tally 0's nearest %v, want [0 1]", got)
	}
}

// A ranking sorts about as many records as its tallies want, however
// few of the records a tally keeps: 50 identities' reports, one tally
// keeping three identities' alone (the rest left out), one all but one.
// A cut shared by the tallies left the first too few, and the ranking
// then sorted every record (the sixteenth hostile pass).
func TestRankingBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, ids, want = 9500, 50, 512
	cos, w, idents := make([]float64, n), make([]float64, n), make([]int, n)
	for i := range cos {
		cos[i], w[i], idents[i] = r.Float64()*2-1, 1, i%ids
	}
	few, most := make([]bool, ids), make([]bool, ids)
	for id := range ids {
		few[id], most[id] = id < 3, id != 7
	}
	rk := newRanking(cos, w, idents, [][]bool{few, most}, want)
	// Each tally's cut bin holds about n/rankBins records beyond its
	// want: 37 of every identity's, 0.8 of the few's.
	if got, bound := len(rk.order), 2*want+2*n/rankBins; got > bound {
		t.Errorf("the ranking sorted %d records, want at most %d", got, bound)
	}
	for g := range 2 {
		if got := rk.nearest(g, want, func(float64) bool { return false }); len(got) != min(want, 3*n/ids) {
			t.Errorf("tally %d took %d records, want %d", g, len(got), min(want, 3*n/ids))
		}
	}
	if len(rk.order) > 2*want+2*n/rankBins {
		t.Errorf("the ranking widened to %d records", len(rk.order))
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
