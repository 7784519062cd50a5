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
	// ent[entAt[j]:entAt[j+1]], its numbers of shown servers, calls and
	// residuals, then their slots, and its residuals' values
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
			t.keepNear(f, x)
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

// keepNear keeps what x adds to a request near it (tally.add).
func (t *tally) keepNear(f *fit, x *rec) {
	t.seqs = append(t.seqs, x.seq)
	head := len(t.ent)
	t.ent = append(t.ent, 0, 0, 0)
	for _, s := range x.shown {
		if slot, ok := t.slots[s]; ok {
			t.ent = append(t.ent, slot)
			t.ent[head]++
		}
	}
	for _, s := range x.servers {
		if slot, ok := t.slots[s]; ok {
			t.ent = append(t.ent, slot)
			t.ent[head+1]++
		}
	}
	f.eachResidual(x, func(id int, r float64) {
		if slot, ok := t.slots[id]; ok {
			t.ent = append(t.ent, slot)
			t.ent[head+2]++
			t.r = append(t.r, r)
		}
	})
	t.entAt, t.rAt = append(t.entAt, int32(len(t.ent))), append(t.rAt, int32(len(t.r)))
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
			for _, s := range b[3 : 3+nShown] {
				p.kShown[s] += k
			}
			for _, s := range b[3+nShown : 3+nShown+nCalls] {
				p.calls[s] += k
			}
			r := t.r[t.rAt[j]:t.rAt[j+1]]
			for e, s := range b[3+nShown+nCalls:] {
				p.resid[s] += k * r[e]
			}
			return
		}
	}
	if x.shown != nil {
		for _, s := range x.shown {
			if slot, ok := t.slot(v, m, s); ok {
				p.kShown[slot] += k
			}
		}
	}
	for _, s := range x.servers {
		if slot, ok := t.slot(v, m, s); ok {
			p.calls[slot] += k
		}
	}
	f.eachResidual(x, func(id int, r float64) {
		if slot, ok := t.slot(v, m, id); ok {
			p.resid[slot] += k * r
		}
	})
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

// nearest is the indices of at most n records, the nearest by cos,
// among those for which keep is true: a min-heap of the n best so far,
// which most records pass by one comparison with its least. The heap
// holds each cosine beside its index, so its comparisons read no other
// memory.
func nearest(cos []float64, n int, keep func(i int) bool) []int {
	type cand struct {
		c float64
		i int
	}
	h := make([]cand, 0, min(n, len(cos)))
	for i, c := range cos {
		full := len(h) == n
		if full && c <= h[0].c || !keep(i) {
			continue
		}
		if full {
			// Replace the least and sift it down.
			h[0] = cand{c, i}
			for j := 0; ; {
				l := 2*j + 1
				if l >= len(h) {
					break
				}
				if r := l + 1; r < len(h) && h[r].c < h[l].c {
					l = r
				}
				if !(h[l].c < h[j].c) {
					break
				}
				h[j], h[l] = h[l], h[j]
				j = l
			}
			continue
		}
		h = append(h, cand{c, i})
		for j := len(h) - 1; j > 0; {
			p := (j - 1) / 2
			if !(h[j].c < h[p].c) {
				break
			}
			h[j], h[p] = h[p], h[j]
			j = p
		}
	}
	out := make([]int, len(h))
	for k, x := range h {
		out[k] = x.i
	}
	return out
}
