package learn

import (
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

	mu sync.Mutex
	co map[int]*coGroups
}

// coGroups are the records that called a chosen server, and the rest
// (group).
type coGroups struct{ in, rest *group }

func newTally(m *model, w []float64) *tally {
	t := &tally{tden: map[int]float64{}, tcalls: map[int]float64{}, tn: map[int]float64{},
		usage: map[int][]float32{}, norm: map[int]float64{}, co: map[int]*coGroups{}}
	scratch := make([]float32, m.dims)
	for i, x := range m.recs {
		wi := w[i]
		if wi == 0 {
			continue
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
	return t
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
// which most records pass by one comparison with its least.
func nearest(cos []float64, n int, keep func(i int) bool) []int {
	h := make([]int, 0, min(n, len(cos)))
	less := func(a, b int) bool { return cos[h[a]] < cos[h[b]] }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && less(r, l) {
				l = r
			}
			if !less(l, i) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for i, c := range cos {
		full := len(h) == n
		if full && c <= cos[h[0]] || !keep(i) {
			continue
		}
		if full {
			h[0] = i
			down(0)
			continue
		}
		h = append(h, i)
		for j := len(h) - 1; j > 0; {
			p := (j - 1) / 2
			if !less(j, p) {
				break
			}
			h[j], h[p] = h[p], h[j]
			j = p
		}
	}
	return h
}
