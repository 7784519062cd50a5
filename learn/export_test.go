package learn

import (
	"cmp"
	"slices"
	"time"
)

// NearSizes are how many reports each of r's tallies took as the tasks
// like this one (own, shared, then the others' without each group).
func NearSizes(r *Request) []int {
	var out []int
	for _, p := range append([]*part{r.own, r.all}, r.alts...) {
		if p != nil {
			out = append(out, len(p.taken))
		}
	}
	return out
}

// MaxNear is maxNear.
const MaxNear = maxNear

// FitOf is the fit v keeps under key (a caller's identity for its own),
// to tell whether it was refitted; nil if none.
func FitOf(v *View, key string) any {
	v.fitMu.Lock()
	defer v.fitMu.Unlock()
	if f := v.fits[key]; f != nil {
		return f
	}
	return nil
}

// DropNear makes every tally v keeps forget what it kept of its records
// (tally.keepNear), as a tally past the view's budget has nothing: its
// requests work it out.
func DropNear(v *View) {
	v.fitMu.Lock()
	defer v.fitMu.Unlock()
	for _, f := range v.fits {
		f.tally.entAt = nil
	}
}

// NearBudget is what v's tallies keep of their records, as counted
// against maxNearBytes and as the fits it keeps hold, and the bound.
func NearBudget(v *View) (used, held, max int64) {
	v.fitMu.Lock()
	defer v.fitMu.Unlock()
	for _, f := range v.fits {
		held += f.nearBytes
	}
	return v.nearUsed, held, maxNearBytes
}

// FitKeys are the keys of the fits v keeps, sorted.
func FitKeys(v *View) []string {
	v.fitMu.Lock()
	defer v.fitMu.Unlock()
	var out []string
	for k := range v.fits {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Nearest are the records each of r's tallies took as the tasks like
// this one (own, shared, then the others' without each group), by
// position; Brute is what a sort of every record would have them take:
// the maxNear nearest by cosine (ties by position) that weigh anything,
// of the identities the tally keeps, down to the first its fit's kernel
// gives nothing.
func Nearest(r *Request) (got, brute [][]int) {
	m := r.m
	w, _ := m.weights(time.Now(), r.v.l.cfg, "")
	for _, p := range append([]*part{r.own, r.all}, r.alts...) {
		if p == nil {
			continue
		}
		got = append(got, p.taken)
		cos := make([]float64, len(m.codes))
		var all []int
		for i, x := range m.codes {
			cos[i] = float64(dotI8(p.q, x) * m.invs[i])
			if w[i] > 0 && p.keep[m.idents[i]] {
				all = append(all, i)
			}
		}
		slices.SortFunc(all, func(a, b int) int {
			if c := cmp.Compare(cos[b], cos[a]); c != 0 {
				return c
			}
			return a - b
		})
		var want []int
		for _, i := range all {
			if p.f.kernel(cos[i]) <= 0 || len(want) == maxNear {
				break
			}
			want = append(want, i)
		}
		slices.Sort(want)
		brute = append(brute, want)
	}
	return got, brute
}
