package learn

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/viterin/vek/vek32"
)

// How the reports are weighed (docs/learning.md, "How the evidence is
// weighed"). Nothing here is tuned on a data set: every amount of trust is
// estimated from the deployment's own reports (empirical Bayes).
//
// A report keeps the descriptions' probability of the servers they ranked
// first (Record.Described). What it adds is how the agent's calls differ
// from those probabilities:
//
//   - each server's offset δ: the calls of every report are binomial with
//     the descriptions' probability shifted by δ in log-odds, δ drawn
//     from N(0, τ²) across the catalog's servers. τ maximises the
//     marginal likelihood of all servers' calls, and a server's δ is its
//     posterior mean: a server with few calls stays near its
//     description, one the descriptions keep missing moves far. A
//     report counts only for the servers it lists, called or showed
//     (serverStats): a server none did keeps its description;
//   - co-use: within the reports that called the server chosen first for
//     a request (and within the rest), the same with δ drawn from
//     N(δ_server, τco²), mixed by the probability that the chosen server
//     is needed;
//   - the tasks like this one: the residuals of the reports near the
//     request (called: 1, not: 0, minus the shifted probability),
//     weighed by the correlation of two reports' residuals at their
//     cosine (ρ, measured on pairs of reports, never decreasing in the
//     cosine), as credibility theory weighs correlated observations: a
//     report at correlation ρ counts ρ/(1−ρ) times the prior.
const (
	// fitBins are the cosine bins ρ is measured in.
	fitBins = 20
	// fitSample bounds the reports whose pairs measure ρ (the newest).
	fitSample = 512
	// maxRho bounds ρ: a report never counts more than 19 times the prior.
	maxRho = 0.95
	// probFloor keeps probabilities and log-odds finite.
	probFloor = 1e-4
	// maxFits bounds the callers whose fits a view keeps.
	maxFits = 64
	// maxNearBytes bounds what a view's tallies keep of each record for
	// the requests near it (tally.keepNear, nearBytes: about 300 bytes
	// for a report with 16 described, 8 shown and 3 called servers):
	// 32 MiB, some 16 tallies of 7,000 such reports or 5 of 20,000.
	// Tallies past it keep nothing, and their requests work it out.
	maxNearBytes = 32 << 20
	// refitAfter is how old a fit may get with reports fading.
	refitAfter = time.Hour
	// refitPace is how many times its fitting's time a fit is kept at
	// least, however much changes: refits take at most about a tenth of
	// a core per fit kept.
	refitPace = 10
)

// The grid offsets are integrated over (log-odds, -6 to 6), and the
// prior spreads tried.
var (
	uGrid   = grid(-6, 6, 0.05)
	tauGrid = []float64{0, 0.25, 0.35, 0.5, 0.7, 1, 1.4, 2, 2.8, 4}
	// phi[stride][t][k] is the N(0, tauGrid[t]²) density at uGrid[k·stride]
	// times the step: the prior's mass there.
	phi = [3][][]float64{nil, priorMass(1), priorMass(2)}
)

func grid(lo, hi, step float64) []float64 {
	var out []float64
	for k := 0; lo+float64(k)*step <= hi+step/2; k++ {
		out = append(out, lo+float64(k)*step)
	}
	return out
}

func priorMass(stride int) [][]float64 {
	out := make([][]float64, len(tauGrid))
	step := 0.05 * float64(stride)
	for t, tau := range tauGrid {
		if tau == 0 {
			continue
		}
		for k := 0; k < len(uGrid); k += stride {
			u := uGrid[k]
			out[t] = append(out[t], math.Exp(-u*u/(2*tau*tau))/(tau*math.Sqrt(2*math.Pi))*step)
		}
	}
	return out
}

// fit is what the reports of one key say, for one weighting of them,
// about each server's offset and how much each kind of evidence can be
// trusted.
type fit struct {
	model   *model
	version uint64
	at      time.Time
	// took is how long the fitting took (cachedFit paces refits by it);
	// ownChanges the changes to the caller's records it saw, for a fit
	// of a caller's own.
	took       time.Duration
	ownChanges uint64
	// used is how many records the weighting used (weight above 0).
	used int
	// glob is each server's offset (by name id); a server no record
	// counts for has none (offset 0: its descriptions' evidence).
	glob map[int]srvFit
	// offs is each server's offset by name id (glob's, for the hot path).
	offs []float64
	// tau and tauCo are the spreads of servers' offsets and of co-use
	// offsets about them; rho the correlation of two reports' residuals
	// by cosine bin, from pairs of total weight pairs.
	tau, tauCo float64
	rho        [fitBins]float64
	pairs      float64
	// kappaTool is how many reports of a server the base rate of its
	// average tool weighs as, against a tool's own (beta-binomial).
	kappaTool float64
	// tally is what the records say whatever the request (tally);
	// nearBytes what it keeps of each record counts against the view's
	// maxNearBytes.
	tally     *tally
	nearBytes int64
}

// srvFit is one server's offset.
type srvFit struct {
	// n, o and e are the weight of the reports that count for it, its
	// calls among them, and the calls the descriptions expected.
	n, o, e float64
	// off is the offset (posterior mean, log-odds).
	off float64
}

// acc accumulates a server's reports: weight, calls, expected calls and
// the sum of squared weights.
type acc struct{ n, o, e, w2 float64 }

// loglik is the log-likelihood of a's calls for each offset mu+u (u on
// the grid, every stride-th), less its largest: binomial, with the
// descriptions' mean probability shifted by the offset, in effective
// counts (weights n²/w2 reports).
func (a acc) loglik(mu float64, stride int) []float64 {
	out := make([]float64, 0, len(uGrid)/stride+1)
	if a.n <= 0 || a.w2 <= 0 {
		for k := 0; k < len(uGrid); k += stride {
			out = append(out, 0)
		}
		return out
	}
	scale := a.n / a.w2
	o, n := a.o*scale, a.n*scale
	l := logit(a.e / a.n)
	best := math.Inf(-1)
	for k := 0; k < len(uGrid); k += stride {
		x := l + mu + uGrid[k]
		v := o*logSigmoid(x) + (n-o)*logSigmoid(-x)
		out = append(out, v)
		best = max(best, v)
	}
	for k := range out {
		out[k] -= best
	}
	return out
}

func logSigmoid(x float64) float64 {
	if x > 0 {
		return -math.Log1p(math.Exp(-x))
	}
	return x - math.Log1p(math.Exp(x))
}

// zeroAt is the grid index of u = 0 at a stride.
func zeroAt(stride int) int { return (len(uGrid) / 2) / stride }

// marginal is the log marginal likelihood of ll under prior t.
func marginal(ll []float64, t, stride int) float64 {
	if tauGrid[t] == 0 {
		return ll[zeroAt(stride)]
	}
	var s float64
	for k, p := range phi[stride][t] {
		s += math.Exp(ll[k]) * p
	}
	return math.Log(s + 1e-300)
}

// chooseTau is the prior spread maximising the marginal likelihood of
// every item (its log-likelihood, times its multiplicity).
func chooseTau(lls [][]float64, mult []float64, stride int) float64 {
	best, bestV := 0.0, math.Inf(-1)
	for t := range tauGrid {
		var v float64
		for i, ll := range lls {
			v += mult[i] * marginal(ll, t, stride)
		}
		if v > bestV {
			best, bestV = tauGrid[t], v
		}
	}
	return best
}

// postMean is the posterior mean of u under prior N(0, tau²).
func postMean(ll []float64, tau float64, stride int) float64 {
	if tau == 0 {
		return 0
	}
	t := slices.Index(tauGrid, tau)
	var num, den float64
	for k, p := range phi[stride][t] {
		w := math.Exp(ll[k]) * p
		num += w * uGrid[k*stride]
		den += w
	}
	if den == 0 {
		return 0
	}
	return num / den
}

func clampP(p float64) float64 { return min(max(p, probFloor), 1-probFloor) }

func logit(p float64) float64 {
	p = clampP(p)
	return math.Log(p / (1 - p))
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// serverStats are the accumulations of every server the records name,
// by name id. A record counts for a server it lists (Record.Described),
// called, or (when it says what was shown) showed: of any other server's
// probability it knows only that it is below the least listed (dmin), and
// taking that bound as the probability would fit every server nobody
// called yet a negative offset. A server no record lists or called has
// no accumulation, and keeps its descriptions' evidence.
func serverStats(m *model, w []float64) map[int]*acc {
	per := map[int]*acc{}
	get := func(id int) *acc {
		a := per[id]
		if a == nil {
			a = &acc{}
			per[id] = a
		}
		return a
	}
	for i, x := range m.recs {
		wi := w[i]
		if wi == 0 || !x.usable() {
			continue
		}
		x.each(func(s int, pd float64, called bool) {
			a := get(s)
			a.n += wi
			a.e += wi * pd
			a.w2 += wi * wi
			if called {
				a.o += wi
			}
		})
	}
	return per
}

// fitFor is the fit of m's records weighed w for the view's catalog.
func (v *View) fitFor(m *model, w []float64, now time.Time, keepNear bool) *fit {
	f := &fit{model: m, version: m.version, at: now, glob: map[int]srvFit{}}
	for _, x := range w {
		if x > 0 {
			f.used++
		}
	}
	per := serverStats(m, w)
	// The catalog's servers that records count for; the others' calls
	// say nothing of any offset, so they leave τ alone.
	var ids []int
	for _, s := range v.servers {
		if id, ok := m.names[s]; ok && per[id] != nil {
			ids = append(ids, id)
		}
	}
	lls := make([][]float64, len(ids))
	mult := make([]float64, len(ids))
	for k, id := range ids {
		lls[k], mult[k] = per[id].loglik(0, 1), 1
	}
	f.tau = chooseTau(lls, mult, 1)
	f.offs = make([]float64, len(m.list))
	for id, a := range per {
		f.glob[id] = srvFit{n: a.n, o: a.o, e: a.e, off: postMean(a.loglik(0, 1), f.tau, 1)}
		f.offs[id] = f.glob[id].off
	}
	f.tauCo = fitCoUse(m, w, f)
	f.fitRho(m, w)
	f.kappaTool = v.fitTools(m, w)
	f.tally = v.newTally(m, w, f, keepNear)
	return f
}

// server is server id's offset; the zero srvFit for a server no record
// counts for.
func (f *fit) server(id int) srvFit { return f.glob[id] }

// group accumulates, for every server, the records of one group (those
// that called a chosen server, or the rest) that count for it (listed,
// called or shown, as serverStats), and n, the group's total weight.
type group struct {
	n   float64
	per map[int]*acc
	// offs keeps the offsets coOffset worked out for a tally's groups,
	// whose parents and spread are their fit's: each is a posterior
	// mean over the grid, taken once per server rather than once per
	// request and tally (the ninth hostile pass).
	mu   sync.Mutex
	offs map[int]float64
}

func newGroup() *group { return &group{per: map[int]*acc{}} }

func (g *group) add(x *rec, wi float64) {
	g.n += wi
	x.each(func(s int, pd float64, called bool) {
		a := g.per[s]
		if a == nil {
			a = &acc{}
			g.per[s] = a
		}
		a.n += wi
		a.e += wi * pd
		a.w2 += wi * wi
		if called {
			a.o += wi
		}
	})
}

// stat is server id's accumulation in g, and whether a record of g
// counts for it.
func (g *group) stat(id int) (acc, bool) {
	if a := g.per[id]; a != nil {
		return *a, true
	}
	return acc{}, false
}

// fitCoUse is τco: the spread of the offsets of servers within the
// reports that called another server, about their own offsets, that
// maximises the marginal likelihood of their calls there (over every
// called server and every server the group's records count for; the
// others' say nothing). It is fitted on every other grid point.
func fitCoUse(m *model, w []float64, f *fit) float64 {
	byServer := map[int][]int{}
	for i, x := range m.recs {
		if w[i] == 0 || !x.usable() {
			continue
		}
		for _, s := range x.servers {
			byServer[s] = append(byServer[s], i)
		}
	}
	var lls [][]float64
	var mult []float64
	for a, recs := range byServer {
		g := newGroup()
		for _, i := range recs {
			g.add(m.recs[i], w[i])
		}
		for id, x := range g.per {
			if id == a {
				continue
			}
			lls = append(lls, x.loglik(f.server(id).off, 2))
			mult = append(mult, 1)
		}
	}
	if len(lls) == 0 {
		return 0
	}
	return chooseTau(lls, mult, 2)
}

// coOffset is server id's offset within group g: its posterior mean about
// its own offset parent with spread tau; parent when g does not name it
// or tau is 0.
func coOffset(g *group, id int, parent, tau float64) float64 {
	st, named := g.stat(id)
	if !named || tau == 0 || st.n <= 0 {
		return parent
	}
	return parent + postMean(st.loglik(parent, 2), tau, 2)
}

// coOffsetOf is coOffset for a group of tally t at its fit f (parent
// f's offset of id, spread f.tauCo), kept in g once worked out.
func (f *fit) coOffsetOf(g *group, id int) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if off, ok := g.offs[id]; ok {
		return off
	}
	off := coOffset(g, id, f.server(id).off, f.tauCo)
	if g.offs == nil {
		g.offs = map[int]float64{}
	}
	g.offs[id] = off
	return off
}

// residuals are a record's residuals for the servers it lists or called
// (the others' are taken as 0), by name id ascending, against the
// descriptions shifted by the servers' offsets.
type residuals struct {
	ids []int
	r   []float64
	ss  float64
}

func (f *fit) residuals(x *rec) residuals {
	var out residuals
	add := func(s int) {
		if slices.Contains(out.ids, s) || !x.counts(s) {
			return
		}
		y := 0.0
		if x.calls(s) {
			y = 1
		}
		out.ids = append(out.ids, s)
		out.r = append(out.r, y-sigmoid(logit(x.pd(s))+f.server(s).off))
	}
	for _, s := range x.descIDs {
		add(s)
	}
	for _, s := range x.servers {
		add(s)
	}
	idx := make([]int, len(out.ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return out.ids[a] - out.ids[b] })
	ids, r := make([]int, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		ids[i], r[i] = out.ids[j], out.r[j]
		out.ss += out.r[j] * out.r[j]
	}
	out.ids, out.r = ids, r
	return out
}

// eachResidual calls fn with each of x's residuals (as residuals), in no
// order and without allocating: for tallying them.
func (f *fit) eachResidual(x *rec, fn func(id int, r float64)) {
	one := func(s int, l float64) {
		if !x.counts(s) {
			return
		}
		y := 0.0
		if x.calls(s) {
			y = 1
		}
		fn(s, y-sigmoid(l+f.offOf(s)))
	}
	for j, s := range x.descIDs {
		if !slices.Contains(x.descIDs[:j], s) {
			one(s, x.descL[j])
		}
	}
	for j, s := range x.servers {
		if !slices.Contains(x.descIDs, s) && !slices.Contains(x.servers[:j], s) {
			one(s, x.dminL)
		}
	}
}

// offOf is server id's offset (server's), from a slice.
func (f *fit) offOf(id int) float64 {
	if id >= 0 && id < len(f.offs) {
		return f.offs[id]
	}
	return 0
}

func dotResid(a, b residuals) float64 {
	var s float64
	for i, j := 0, 0; i < len(a.ids) && j < len(b.ids); {
		switch {
		case a.ids[i] < b.ids[j]:
			i++
		case a.ids[i] > b.ids[j]:
			j++
		default:
			s += a.r[i] * b.r[j]
			i++
			j++
		}
	}
	return s
}

func cosBin(c float64) int { return min(max(int(c*fitBins), 0), fitBins-1) }

// fitRho measures ρ: for pairs of the newest reports, the correlation of
// their residuals by cosine bin. A bin starts from one pair's worth of
// no correlation (no pair, no credibility); ρ may not fall as the cosine
// rises (pool-adjacent-violators), and stays within [0, maxRho].
func (f *fit) fitRho(m *model, w []float64) {
	var sample []int
	for i := len(m.recs) - 1; i >= 0 && len(sample) < fitSample; i-- {
		if w[i] > 0 && m.recs[i].usable() {
			sample = append(sample, i)
		}
	}
	if len(sample) < 2 {
		return
	}
	res := make([]residuals, len(sample))
	var ssMean float64
	for k, i := range sample {
		res[k] = f.residuals(m.recs[i])
		ssMean += res[k].ss
	}
	ssMean /= float64(len(sample))
	if ssMean == 0 {
		return
	}
	var num, den [fitBins]float64
	for a := range sample {
		xa := m.recs[sample[a]]
		for b := a + 1; b < len(sample); b++ {
			xb := m.recs[sample[b]]
			wt := w[sample[a]] * w[sample[b]]
			bin := cosBin(float64(vek32.Dot(xa.vec, xb.vec)))
			num[bin] += wt * dotResid(res[a], res[b])
			den[bin] += wt * (res[a].ss + res[b].ss) / 2
			f.pairs += wt
		}
	}
	// Pool adjacent violators: ρ non-decreasing in the cosine.
	type block struct {
		v, w float64
		n    int
	}
	var blocks []block
	for b := range num {
		wt := den[b] + ssMean
		blocks = append(blocks, block{num[b] / wt, wt, 1})
		for len(blocks) > 1 && blocks[len(blocks)-2].v > blocks[len(blocks)-1].v {
			x, y := blocks[len(blocks)-2], blocks[len(blocks)-1]
			blocks = blocks[:len(blocks)-1]
			blocks[len(blocks)-1] = block{(x.v*x.w + y.v*y.w) / (x.w + y.w), x.w + y.w, x.n + y.n}
		}
	}
	b := 0
	for _, blk := range blocks {
		for j := 0; j < blk.n; j++ {
			f.rho[b] = min(max(blk.v, 0), maxRho)
			b++
		}
	}
}

// kernel is how many times the prior a report at cosine c counts:
// ρ/(1−ρ), ρ interpolated between the bins' centres.
func (f *fit) kernel(c float64) float64 {
	x := c*fitBins - 0.5
	var r float64
	switch {
	case x <= 0:
		r = f.rho[0]
	case x >= fitBins-1:
		r = f.rho[fitBins-1]
	default:
		i := int(x)
		t := x - float64(i)
		r = f.rho[i]*(1-t) + f.rho[i+1]*t
	}
	if r <= 0 {
		return 0
	}
	return r / (1 - r)
}

// fitTools is κ for tools: the beta-binomial strength of the base rate
// of a server's average tool, from how much its tools' rates vary
// beyond chance (method of moments, pooled over servers); large when
// they do not vary.
func (v *View) fitTools(m *model, w []float64) float64 {
	tden := map[int]float64{}
	calls := map[int]map[int]float64{}
	for i, x := range m.recs {
		if w[i] == 0 || len(x.tools) == 0 {
			continue
		}
		seen := map[int]bool{}
		for j, t := range x.tools {
			s := x.toolSrv[j]
			if !seen[s] {
				seen[s] = true
				tden[s] += w[i]
			}
			if calls[s] == nil {
				calls[s] = map[int]float64{}
			}
			calls[s][t] += w[i]
		}
	}
	var num, den float64
	for s, n := range tden {
		nt := float64(v.toolCount[m.list[s]])
		if nt < 2 || n <= 1 {
			continue
		}
		var total float64
		for _, c := range calls[s] {
			total += c
		}
		p := total / (n * nt)
		if p <= 0 || p >= 1 {
			continue
		}
		q := p * (1 - p)
		called := 0.0
		for _, c := range calls[s] {
			num += (c - n*p) * (c - n*p) / q
			called++
		}
		num += max(nt-called, 0)*(n*p)*(n*p)/q - nt*n
		den += nt * n * (n - 1)
	}
	if den <= 0 || num <= 0 {
		return 1e9
	}
	rho := min(num/den, 1)
	return (1 - rho) / rho
}
