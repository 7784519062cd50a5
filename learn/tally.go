package learn

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/viterin/vek/vek32"
)

// maxNear bounds the reports a request's tasks like this one are taken
// from: the maxNear nearest by cosine among those of each weighting
// (part). Beyond them a report adds nothing a request can use (its
// credibility weight is at most the nearest's, and Credibility is
// already Similar/(Similar+1) of hundreds), and counting them made
// every caller's Route cost grow with every report stored (the eighth
// hostile pass: 86 ms of CPU per Route at 7,000 reports).
const maxNear = 512

// maxCo bounds the chosen servers whose co-use groups a tally keeps.
const maxCo = 32

// tally is what the records of one fit say whatever the request: the
// weight of the usable ones, the tools' counts, each server's usage
// vector and, made on first use for each server chosen first, the
// co-use groups. It is made with the fit, at the fit's weights, and so
// is as fresh as the fit (cachedFit): a request costs the reports near
// it, not every report.
type tally struct {
	// recs and w are the records weighing anything at the fit and their
	// weights, for the co-use groups.
	recs []*rec
	w    []float64
	// total is the weight of the usable records.
	total float64
	// Per server name id: the weight of the records that called it
	// with tools and their tool calls; per tool key id, its calls.
	tden, tcalls, tn map[int]float64
	// usage is each server's usage vector: the weighted sum of the
	// vectors of the requests that called it; norm its norm.
	usage map[int][]float32
	norm  map[int]float64
	// slots are the view's catalog slots (View.slotOf) by name id, of
	// the names the model had at the fit (names of them: ids below
	// names).
	slots map[int]int32
	names int
	// What each of recs adds to a request it is near, at the fit, per
	// catalog slot (kept unless the view's budget for it is spent,
	// maxNearBytes), one block per record: recs[j]'s is
	// ent[entAt[j]:entAt[j+1]], its numbers of shown servers and calls,
	// then the slots of those and of its residuals, and its residuals'
	// values
	// r[rAt[j]:rAt[j+1]]. It depends on the record and the fit, never on
	// the request, so a request reads it rather than taking a sigmoid
	// and a map entry for each server of each of its near reports (the
	// ninth hostile pass: a third of another caller's Route after 7,000
	// reports). A record is found by its position in the model's records
	// while they are as at the fit (pos, version), else by its seq (seqs
	// ascending, at their j).
	version    uint64
	pos        []int32
	seqs       []uint64
	at         []int32
	entAt, rAt []int32
	ent        []int32
	r          []float64

	mu sync.Mutex
	co map[int]*coGroups
}

// coGroups are the records that called a chosen server, and the rest
// (group).
type coGroups struct{ in, rest *group }

// newTally is the tally of m's records weighed w at fit f; with keep,
// it keeps what each adds to a request near it.
func (v *View) newTally(m *model, w []float64, f *fit, keep bool) *tally {
	t := &tally{tden: map[int]float64{}, tcalls: map[int]float64{}, tn: map[int]float64{},
		usage: map[int][]float32{}, norm: map[int]float64{}, co: map[int]*coGroups{},
		slots: map[int]int32{}, names: len(m.list)}
	for s, slot := range v.slotOf {
		if id, ok := m.names[s]; ok {
			t.slots[id] = slot
		}
	}
	if keep {
		t.version, t.pos, t.entAt, t.rAt = m.version, make([]int32, len(m.recs)), []int32{0}, []int32{0}
	}
	scratch := make([]float32, m.dims)
	for i, x := range m.recs {
		wi := w[i]
		if keep {
			t.pos[i] = -1
		}
		if wi == 0 {
			continue
		}
		if keep {
			t.pos[i] = int32(len(t.recs))
			t.keepNear(v, m, f, x)
		}
		t.recs = append(t.recs, x)
		t.w = append(t.w, wi)
		for _, s := range x.servers {
			u := t.usage[s]
			if u == nil {
				u = make([]float32, m.dims)
				t.usage[s] = u
			}
			vek32.Add_Inplace(u, vek32.MulNumber_Into(scratch, x.vec, float32(wi)))
		}
		for j, tl := range x.tools {
			s := x.toolSrv[j]
			if !slices.Contains(x.toolSrv[:j], s) {
				t.tden[s] += wi
			}
			t.tn[tl] += wi
			t.tcalls[s] += wi
		}
		if x.usable() {
			t.total += wi
		}
	}
	for s, u := range t.usage {
		t.norm[s] = math.Sqrt(float64(vek32.Dot(u, u)))
	}
	if !keep {
		return t
	}
	t.at = make([]int32, len(t.seqs))
	for j := range t.at {
		t.at[j] = int32(j)
	}
	slices.SortFunc(t.at, func(a, b int32) int { return cmp.Compare(t.seqs[a], t.seqs[b]) })
	sorted := make([]uint64, len(t.at))
	for k, j := range t.at {
		sorted[k] = t.seqs[j]
	}
	t.seqs = sorted
	return t
}

// keepNear keeps what x adds to a request near it (tally.add): a block
// of its numbers of shown servers and calls, then the slots of its shown
// servers, calls and residuals, and its residuals' values.
func (t *tally) keepNear(v *View, m *model, f *fit, x *rec) {
	t.seqs = append(t.seqs, x.seq)
	head := len(t.ent)
	t.ent = append(t.ent, 0, 0)
	t.eachNear(v, m, f, x,
		func(slot int32) { t.ent = append(t.ent, slot); t.ent[head]++ },
		func(slot int32) { t.ent = append(t.ent, slot); t.ent[head+1]++ },
		func(slot int32, r float64) { t.ent = append(t.ent, slot); t.r = append(t.r, r) })
	t.entAt, t.rAt = append(t.entAt, int32(len(t.ent))), append(t.rAt, int32(len(t.r)))
}

// eachNear calls shown, call and res with the catalog slot of each
// server x showed, called, and has a residual for at the tally's fit f
// (with its value), in that order: what x adds to a request near it.
// Names outside the catalog are left out: nothing reads them.
func (t *tally) eachNear(v *View, m *model, f *fit, x *rec, shown, call func(slot int32), res func(slot int32, r float64)) {
	for _, s := range x.shown {
		if slot, ok := t.slot(v, m, s); ok {
			shown(slot)
		}
	}
	for _, s := range x.servers {
		if slot, ok := t.slot(v, m, s); ok {
			call(slot)
		}
	}
	f.eachResidual(x, func(id int, r float64) {
		if slot, ok := t.slot(v, m, id); ok {
			res(slot, r)
		}
	})
}

// nearBytes bounds what newTally keeps for the records weighed in w
// (keepNear), before it is made: for the view's budget.
func nearBytes(m *model, w []float64) int64 {
	var n int64
	for i, x := range m.recs {
		if w[i] > 0 {
			n += 8 + 4*5 + 4*int64(len(x.servers)+len(x.shown)) + 12*int64(len(x.descIDs)+len(x.servers))
		}
	}
	return n
}

// slot is name id's catalog slot (View.slotOf), for a name the model
// had at the fit or one named since.
func (t *tally) slot(v *View, m *model, id int) (int32, bool) {
	if id < t.names {
		slot, ok := t.slots[id]
		return slot, ok
	}
	slot, ok := v.slotOf[m.list[id]]
	return slot, ok
}

// add adds what x, near a request with credibility weight k, says of
// each catalog server to p: the weight of the shown servers, the calls
// and the residuals at the tally's fit f. What the tally kept for x is
// read; for a record stored since, or when the tally keeps nothing, it
// is worked out (the same values, in the same order).
func (t *tally) add(p *part, v *View, m *model, f *fit, i int, x *rec, k float64) {
	if t.entAt != nil {
		j := int32(-1)
		if m.version == t.version {
			j = t.pos[i]
		} else if e, ok := slices.BinarySearch(t.seqs, x.seq); ok {
			j = t.at[e]
		}
		if j >= 0 {
			b := t.ent[t.entAt[j]:t.entAt[j+1]]
			nShown, nCalls := b[0], b[1]
			for _, s := range b[2 : 2+nShown] {
				p.kShown[s] += k
			}
			for _, s := range b[2+nShown : 2+nShown+nCalls] {
				p.calls[s] += k
			}
			r := t.r[t.rAt[j]:t.rAt[j+1]]
			for e, s := range b[2+nShown+nCalls:] {
				p.resid[s] += k * r[e]
			}
			return
		}
	}
	t.eachNear(v, m, f, x,
		func(slot int32) { p.kShown[slot] += k },
		func(slot int32) { p.calls[slot] += k },
		func(slot int32, r float64) { p.resid[slot] += k * r })
}

// groups are the co-use groups of chosen server a: the usable records
// that called it, and the rest.
func (t *tally) groups(a int) *coGroups {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g := t.co[a]; g != nil {
		return g
	}
	g := &coGroups{in: newGroup(), rest: newGroup()}
	for i, x := range t.recs {
		if !x.usable() {
			continue
		}
		if x.calls(a) {
			g.in.add(x, t.w[i])
		} else {
			g.rest.add(x, t.w[i])
		}
	}
	if len(t.co) >= maxCo {
		for k := range t.co {
			delete(t.co, k)
			break
		}
	}
	t.co[a] = g
	return g
}

// ranking is the records a request may take as the tasks like this one
// (those weighing anything), nearest first: by cosine, descending, then
// by position. It is made once per request for all of its tallies: one
// pass counts each tally's records (those of the identities it keeps) by
// cosine, which finds each tally's cut, the bin above which it has want
// of them; the records above the cut of a tally keeping them are sorted,
// alone. So every tally finds its nearest in one order of about as many
// records as the tallies want, however the identities split the reports.
// (A cut shared by every tally let a tally of few identities' reports,
// the fifty-identity "rest" left out, find too few above it, and the
// ranking then sorted every record: the sixteenth hostile pass, bob's
// Route p50 3.3 times idle at 9,500 reports by 50 identities.)
type ranking struct {
	cos    []float64
	w      []float64
	idents []int
	// keeps[g][identity] says whether tally g takes identity's records;
	// cuts[g] is its cut bin (0: every record it takes is in order).
	keeps [][]bool
	cuts  []int
	order []int32
}

// rankBins are the cosine bins ranking counts records in to find its cut.
const rankBins = 256

func rankBin(c float64) int { return min(max(int((c+1)*rankBins/2), 0), rankBins-1) }

// newRanking ranks the records whose cosines with the request are cos,
// weighed w, of identities idents, for the tallies keeps (by identity
// id), each wanting its want nearest.
func newRanking(cos, w []float64, idents []int, keeps [][]bool, want int) *ranking {
	r := &ranking{cos: cos, w: w, idents: idents, keeps: keeps, cuts: make([]int, len(keeps))}
	count := make([][rankBins]int, len(keeps))
	for i, c := range cos {
		if w[i] <= 0 {
			continue
		}
		b, id := rankBin(c), idents[i]
		for g, keep := range keeps {
			if keep[id] {
				count[g][b]++
			}
		}
	}
	for g := range keeps {
		n := 0
		for b := rankBins - 1; b > 0; b-- {
			if n += count[g][b]; n >= want {
				r.cuts[g] = b
				break
			}
		}
	}
	for i, c := range cos {
		if w[i] > 0 && r.takes(i, rankBin(c)) {
			r.order = append(r.order, int32(i))
		}
	}
	r.sort()
	return r
}

// takes says whether record i, in cosine bin b, is above the cut of a
// tally keeping it.
func (r *ranking) takes(i, b int) bool {
	id := r.idents[i]
	for g, keep := range r.keeps {
		if keep[id] && b >= r.cuts[g] {
			return true
		}
	}
	return false
}

func (r *ranking) sort() {
	// One ordered key per record, sorted without a comparison function:
	// the cosine (a float32's value: dotI8's product) made to sort
	// descending in the high half, the position ascending in the low.
	keys := make([]uint64, len(r.order))
	for k, i := range r.order {
		keys[k] = uint64(descKey(float32(r.cos[i])))<<32 | uint64(uint32(i))
	}
	slices.Sort(keys)
	for k, key := range keys {
		r.order[k] = int32(uint32(key))
	}
}

// descKey orders float32s descending as unsigned integers ascending
// (NaN aside): the IEEE bits, sign bit flipped for positives and every
// bit for negatives, then complemented.
func descKey(c float32) uint32 {
	if c == 0 {
		c = 0 // -0 as 0: equal cosines go by position
	}
	b := math.Float32bits(c)
	if b&(1<<31) != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return ^b
}

// nearest is the indices of at most n records of tally g, the nearest
// first, down to the first whose cosine stop says ends the walk (stop is
// true of every cosine below one it is true of).
//
// The order holds every record of the tally down to its cut, and others'
// below it: the walk ends at the cut.
func (r *ranking) nearest(g, n int, stop func(c float64) bool) []int {
	keep, cut := r.keeps[g], r.cuts[g]
	out := make([]int, 0, n)
	for _, i := range r.order {
		if !keep[r.idents[i]] {
			continue
		}
		if cut > 0 && rankBin(r.cos[i]) < cut {
			break
		}
		if stop(r.cos[i]) {
			return out
		}
		if out = append(out, int(i)); len(out) == n {
			return out
		}
	}
	if cut == 0 {
		return out // every record of the tally was in order
	}
	// The cut left too few (n above the want it was made for): every
	// record of the tally.
	r.cuts[g] = 0
	r.order = r.order[:0]
	for i, c := range r.cos {
		if r.w[i] > 0 && r.takes(i, rankBin(c)) {
			r.order = append(r.order, int32(i))
		}
	}
	r.sort()
	return r.nearest(g, n, stop)
}
