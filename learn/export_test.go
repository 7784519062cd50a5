package learn

// NearSizes are how many reports each of r's tallies took as the tasks
// like this one (own, shared, then the others' without each group).
func NearSizes(r *Request) []int {
	var out []int
	for _, p := range append([]*part{r.own, r.all}, r.alts...) {
		if p != nil {
			out = append(out, p.nearN)
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
