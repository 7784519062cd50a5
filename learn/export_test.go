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
