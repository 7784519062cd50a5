package learn

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/viterin/vek/vek32"
)

// Evidence is what the reports say about one server or tool for one
// request, and the probability that results. Its fields are the features
// a probability map fitted across catalogs (Config.Combine) would take;
// Bayes is the update used without one.
type Evidence struct {
	// P is the probability of being needed with the learned evidence;
	// PD the descriptions' alone.
	P, PD float64
	// Offset is the shift of log-odds the reports make of the
	// descriptions' probability for this server (for a tool: its base
	// rate within its server's tasks against an average tool's); Base is
	// the rate the reports observed (shrunk), Expected the one the
	// descriptions gave the same reports, Reports their weight.
	Offset, Base, Expected, Reports float64
	// Global is PD shifted by Offset.
	Global float64
	// Co is the probability with co-use: the chance that CoWith (the
	// server chosen first for this request) is needed, CoChosen, mixes
	// the rates within the tasks that called it (CoRate of CoTasks) and
	// within the rest. Co is Global when there is no co-use evidence.
	Co, CoChosen, CoRate, CoTasks float64
	CoWith                        string
	// Similar is how many times the prior the tasks like this one count
	// (the sum of their credibility weights); Rate is the share of them
	// that called it, Residual their mean residual, Credibility
	// Similar/(Similar+1).
	Similar, Rate, Residual, Credibility float64
	// Near is the weight of the reports counted among the tasks like
	// this one (each counts once, however close); Reported the weight of
	// every report weighed, so Near ≤ Reported.
	Near, Reported float64
	// Usage is the cosine of the request with the usage vector (the
	// weighted mean of the requests that called it); 0 if never called.
	Usage float64
	// Foreign is the weight of other identities' reports in P (Request).
	Foreign float64
	// Text says it in one phrase: "called in 38% of tasks like this".
	Text string
}

// Bayes is the update from the evidence (docs/learning.md): the
// credibility-weighted mean of the tasks like this one's estimate (the
// global probability plus their mean residual) and the co-use one.
func (e Evidence) Bayes() float64 {
	p := e.Co
	if e.Similar > 0 {
		p = (1-e.Credibility)*e.Co + e.Credibility*(e.Global+e.Residual)
	}
	return clampP(p)
}

// Request is the learned evidence for one request: made by View.Request,
// read by Server and Tool. Nil when nothing is learned (Server and Tool
// then answer the description's confidence unchanged).
//
// Unless the learner shares every report alike (Config.Share), a
// caller's answer is its own evidence (its own reports; the descriptions
// without any) moved by what other identities' reports add, under two
// rules (docs/learning.md, "Whose reports count"):
//
//   - the others weigh Foreign, at most max(ForeignFloor, ForeignRatio ×
//     the caller's own) reports against the caller's own;
//   - no single identity counts alone: the others' evidence is tallied
//     once without each other identity (the maxGroups−1 weighing most
//     one by one, the rest as one group), and it moves a probability only
//     as far as every one of those tallies agrees, in direction and at
//     most by the least of them. With one other identity it moves
//     nothing. So one identity's reports can weaken what the others' say
//     for a caller, never add to it or turn it round.
type Request struct {
	v       *View
	m       *model
	own     *part
	all     *part   // Share: every report alike
	alts    []*part // otherwise: the pooled reports without each group of others
	foreign float64
	combine func(Evidence) float64
}

// maxGroups bounds the tallies of the others' evidence a request makes
// (Request): the identities weighing most are left out one by one, the
// rest together.
const maxGroups = 4

// part is the evidence of one weighting of the reports.
type part struct {
	v *View
	m *model
	f *fit
	t *tally
	q []float32
	// Per catalog server (by View.slotOf), over the tasks like this one
	// (the maxNear nearest records of this weighting): the credibility
	// weights of the records that count for it (kAll: those that do not
	// say what was shown, plus kShown), and their weighted calls and
	// residuals.
	kAll   float64
	near   float64
	kShown []float64
	calls  []float64
	resid  []float64
	// The chosen servers (the first and second by the descriptions, name
	// ids or -1), their probabilities, and their groups and the rest.
	chosen  [2]int
	pChosen [2]float64
	co      [2]*coGroups
	// Tools, over the tasks like this one: per server name id, the
	// credibility weight and weight of the records that called it with
	// tools; per tool key id, the credibility weight of those that
	// called it.
	tk, tnear, tu map[int]float64
	// taken are the records taken as the tasks like this one, by
	// position; keep is which identities' records the part tallies.
	taken []int
	keep  []bool
}

// Request tallies the reports for a request of caller (its identity, as
// in Use) with unit vector q. ranked are the server labels best first by
// description probability (probs): the first is the chosen server whose
// co-use counts (the second for the first itself). It returns nil when
// the view's key has no reports.
//
// Its cost is one cosine per stored report and, per weighting, the
// maxNear reports nearest q; what does not depend on the request is
// tallied with each weighting's fit (tally).
func (v *View) Request(caller string, q []float32, ranked []int, probs []float64) *Request {
	if v == nil || len(q) == 0 {
		return nil
	}
	l := v.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	m := l.models[v.key]
	if m == nil || len(m.recs) == 0 || m.dims != len(q) {
		return nil
	}
	now := time.Now()
	r := &Request{v: v, m: m, combine: l.cfg.Combine}
	wAll, mass := m.weights(now, l.cfg, "")
	// The tallies this request makes, by what each keeps of the
	// identities (by identity id), and under what key its fit is kept.
	type tallyOf struct {
		key  string
		own  int
		keep []bool
	}
	var tallies []tallyOf
	every := func(keep func(identity int) bool) []bool {
		out := make([]bool, len(m.ids))
		for id := range out {
			out[id] = keep(id)
		}
		return out
	}
	var own float64
	if l.cfg.Share {
		r.foreign = 1
		tallies = append(tallies, tallyOf{"", -1, every(func(int) bool { return true })})
	} else {
		if id, ok := m.ids[caller]; ok && caller != "" {
			for i, x := range m.idents {
				if x == id {
					own += wAll[i]
				}
			}
			if own > 0 {
				tallies = append(tallies, tallyOf{caller, id, every(func(identity int) bool { return identity == id })})
			}
		}
		// One other identity (or none) does not count alone: no tallies
		// of the others then.
		if groups := m.othersGroups(mass, caller, maxGroups); len(groups) >= 2 {
			var total float64
			for _, x := range wAll {
				total += x
			}
			foreign := total - own
			f := min(foreign, max(l.cfg.ForeignFloor, l.cfg.ForeignRatio*own))
			r.foreign = f / (own + f)
			for _, g := range groups {
				tallies = append(tallies, tallyOf{g.key, -1, every(func(identity int) bool { return !g.has[identity] })})
			}
		}
	}
	if len(tallies) == 0 {
		return r
	}
	// Each record's cosine with the request, once for every tally: from
	// its int8 codes (dotI8), the memory a scan of thousands of reports
	// is bound by.
	cos := make([]float64, len(m.codes))
	for i, x := range m.codes {
		cos[i] = float64(dotI8(q, x) * m.invs[i])
	}
	// The records nearest first, once for every tally: enough for each
	// to take maxNear of those it keeps.
	keeps := make([][]bool, len(tallies))
	for g, t := range tallies {
		keeps[g] = t.keep
	}
	rank := newRanking(cos, wAll, m.idents, keeps, maxNear)
	for g, t := range tallies {
		w := func() []float64 {
			out := make([]float64, len(wAll))
			for i, x := range m.idents {
				if t.keep[x] {
					out[i] = wAll[i]
				}
			}
			return out
		}
		p := v.part(m, w, g, t.key, t.own, q, cos, wAll, rank, ranked, probs, now)
		switch {
		case l.cfg.Share:
			r.all = p
		case t.own >= 0:
			r.own = p
		default:
			r.alts = append(r.alts, p)
		}
	}
	return r
}

// part tallies the reports of one weighting: those of rank's tally g,
// weighed wAll (w makes the whole weighting, for a fit under key), for
// a request q whose cosine with each record is cos.
func (v *View) part(m *model, w func() []float64, g int, key string, own int, q []float32, cos, wAll []float64, rank *ranking, ranked []int, probs []float64, now time.Time) *part {
	f := v.cachedFit(m, w, key, own, now)
	n := len(v.slotLi)
	r := &part{v: v, m: m, f: f, t: f.tally, q: q, kShown: make([]float64, n), calls: make([]float64, n), resid: make([]float64, n),
		tk: map[int]float64{}, tu: map[int]float64{}, tnear: map[int]float64{}, chosen: [2]int{-1, -1}}
	for k := 0; k < 2 && k < len(ranked); k++ {
		if id, ok := m.names[v.idx.Labels[ranked[k]].ID]; ok {
			r.chosen[k] = id
			r.pChosen[k] = sigmoid(logit(probs[k]) + f.server(id).off)
			r.co[k] = r.t.groups(id)
		}
	}
	near := rank.nearest(g, maxNear, func(c float64) bool { return f.kernel(c) <= 0 })
	r.taken, r.keep = near, rank.keeps[g]
	// In the records' order: what is read of each is then read in
	// sequence (the tally's blocks are in the same order).
	slices.Sort(near)
	for _, i := range near {
		x, wi := m.recs[i], wAll[i]
		k := wi * f.kernel(cos[i])
		for j, t := range x.tools {
			if s := x.toolSrv[j]; !slices.Contains(x.toolSrv[:j], s) {
				r.tk[s] += k
				r.tnear[s] += wi
			}
			r.tu[t] += k
		}
		if !x.usable() {
			continue
		}
		r.near += wi
		if x.shown == nil {
			r.kAll += k
		}
		r.t.add(r, v, m, f, i, x, k)
	}
	return r
}

// cachedFit is the fit of m weighed w() under key (a caller, or "" for
// every identity's reports), refitted when enough has changed: as many
// changes to m as a hundredth of the records the fit used (at least
// one), another model, or an hour (reports fade). A caller's fit of its
// own reports (own, its identity id; -1 for any other weighting) counts
// only the changes to them, so it stays exact however many reports
// another identity sends, and costs nothing then.
//
// A refit of any other fit that is merely stale is paced and does not
// block: not before refitPace times its last fitting's time has passed,
// and while one caller refits, the others use the stale fit. So a flood
// of reports costs a bounded share of the CPU in refits, and no Route
// waits on another's refit (the eighth hostile pass).
func (v *View) cachedFit(m *model, w func() []float64, key string, own int, now time.Time) *fit {
	v.fitMu.Lock()
	f := v.fits[key]
	if f != nil && f.model == m && now.Sub(f.at) < refitAfter {
		if own >= 0 {
			if m.changesOf(own) == f.ownChanges {
				v.fitMu.Unlock()
				return f
			}
		} else if changed := m.version - f.version; changed == 0 || changed < uint64(max(1, f.used/100)) ||
			now.Sub(f.at) < refitPace*f.took || v.fitting[key] {
			v.fitMu.Unlock()
			return f
		}
	}
	v.fitting[key] = true
	v.fitMu.Unlock()
	start := time.Now()
	ws := w()
	// What the tally keeps per record comes out of the view's budget
	// (maxNearBytes), reserved before it is made; without room the
	// tally keeps nothing and its requests work it out.
	need := nearBytes(m, ws)
	v.fitMu.Lock()
	keep := v.nearUsed+need <= maxNearBytes
	if keep {
		v.nearUsed += need
	}
	v.fitMu.Unlock()
	nf := v.fitFor(m, ws, now, keep)
	if keep {
		nf.nearBytes = need
	}
	nf.took = time.Since(start)
	nf.ownChanges = m.changesOf(own)
	v.fitMu.Lock()
	defer v.fitMu.Unlock()
	delete(v.fitting, key)
	if old, ok := v.fits[key]; ok {
		v.nearUsed -= old.nearBytes
	} else if len(v.fits) >= maxFits {
		for k, old := range v.fits {
			v.nearUsed -= old.nearBytes
			delete(v.fits, k)
			break
		}
	}
	v.fits[key] = nf
	return nf
}

// Server is the evidence for server label li whose description-based
// probability is pd.
func (r *Request) Server(li int, pd float64) Evidence {
	if r == nil {
		return Evidence{P: pd, PD: pd}
	}
	return r.mix(pd, func(p *part) Evidence { return p.server(li, pd) })
}

// Tool is the evidence for tool label li whose description-based
// probability is pd: how often it is called in the tasks that call its
// server with tools, against an average tool of that server.
func (r *Request) Tool(li int, pd float64) Evidence {
	if r == nil {
		return Evidence{P: pd, PD: pd}
	}
	return r.mix(pd, func(p *part) Evidence { return p.tool(li, pd) })
}

// mix is the caller's own evidence moved by the others' (Request): with
// Share, every identity's alike; otherwise by Foreign times the least
// move of the tallies without each group of others, and only when they
// all move it the same way.
func (r *Request) mix(pd float64, of func(*part) Evidence) Evidence {
	own := Evidence{P: pd, PD: pd}
	if r.own != nil {
		own = r.finish(of(r.own))
	}
	if r.all != nil {
		all := r.finish(of(r.all))
		all.Foreign = 1
		return all
	}
	if len(r.alts) == 0 || r.foreign <= 0 {
		return own
	}
	var least Evidence
	var d float64
	for i, p := range r.alts {
		e := r.finish(of(p))
		di := e.P - own.P
		switch {
		case i == 0:
			least, d = e, di
		case di*d <= 0:
			return own // they disagree, or one adds nothing
		case abs(di) < abs(d):
			least, d = e, di
		}
	}
	if d == 0 {
		return own
	}
	out := own
	if r.foreign > 0.5 || r.own == nil {
		out = least
	}
	out.P = own.P + r.foreign*d
	out.Foreign = r.foreign
	return out
}

func (r *Request) finish(e Evidence) Evidence {
	if e.Reports == 0 && e.Similar == 0 {
		return e
	}
	e.P = e.Bayes()
	if r.combine != nil {
		e.P = clampP(r.combine(e))
	}
	e.Text = e.text()
	return e
}

// server is the evidence of p for server label li.
func (p *part) server(li int, pd float64) Evidence {
	f := p.f
	id, ok := p.m.names[p.v.idx.Labels[li].ID]
	if !ok {
		id = -1
	}
	g := f.server(id)
	e := Evidence{PD: pd, P: pd, Offset: g.off, Reports: g.n}
	if g.n > 0 {
		e.Expected = g.e / g.n
		e.Base = sigmoid(logit(e.Expected) + g.off)
	}
	lp := logit(pd)
	e.Global = sigmoid(lp + g.off)
	e.Co = e.Global
	// Co-use: with the first chosen server, or the second for the first.
	k := 0
	if p.chosen[0] == id && id >= 0 {
		k = 1
	}
	if a := p.chosen[k]; a >= 0 && a != id && id >= 0 && p.co[k].in.n > 0 {
		in, rest := p.co[k].in, p.co[k].rest
		if _, named := in.stat(id); named {
			offIn := f.coOffsetOf(in, id)
			offRest := f.coOffsetOf(rest, id)
			c := p.pChosen[k]
			e.Co = c*sigmoid(lp+offIn) + (1-c)*sigmoid(lp+offRest)
			st, _ := in.stat(id)
			e.CoWith, e.CoChosen, e.CoTasks, e.CoRate = p.m.list[a], c, in.n, st.o/in.n
		}
	}
	e.Similar, e.Near, e.Reported = p.kAll, p.near, p.t.total
	slot, inCatalog := p.v.slotOf[p.v.idx.Labels[li].ID]
	if ok && inCatalog {
		e.Similar += p.kShown[slot]
	}
	if e.Similar > 0 {
		e.Credibility = e.Similar / (e.Similar + 1)
		if ok && inCatalog {
			e.Rate = p.calls[slot] / e.Similar
			e.Residual = p.resid[slot] / e.Similar
		}
	}
	if n := p.t.norm[id]; ok && n > 0 {
		e.Usage = float64(vek32.Dot(p.q, p.t.usage[id])) / n
	}
	return e
}

// tool is the evidence of p for tool label li.
func (p *part) tool(li int, pd float64) Evidence {
	lb := &p.v.idx.Labels[li]
	sid, ok := p.m.names[lb.Server]
	if !ok || p.t.tden[sid] == 0 {
		return Evidence{P: pd, PD: pd}
	}
	tden, nt := p.t.tden[sid], float64(max(p.v.toolCount[lb.Server], 1))
	avg := clampP(p.t.tcalls[sid] / (tden * nt))
	var n, u float64
	if id, ok := p.m.names[toolKey(lb.Server, lb.Name, p.v.hash[li])]; ok {
		n, u = p.t.tn[id], p.tu[id]
	}
	kappa := p.f.kappaTool
	base := clampP((n + kappa*avg) / (tden + kappa))
	e := Evidence{PD: pd, P: pd, Reports: tden, Base: base, Expected: avg, Offset: logit(base) - logit(avg)}
	e.Global = sigmoid(logit(pd) + e.Offset)
	e.Co = e.Global
	if k := p.tk[sid]; k > 0 {
		e.Similar, e.Credibility, e.Near, e.Reported = k, k/(k+1), p.tnear[sid], tden
		e.Rate = u / k
		e.Residual = e.Rate - base
	}
	return e
}

// text is the evidence in one phrase, from the part that weighs most.
func (e Evidence) text() string {
	switch {
	case e.Credibility >= 0.5:
		// Of every report weighed, not e.Reports (those that count for
		// this server), which can be fewer than the tasks like this.
		return fmt.Sprintf("called in %.0f%% of tasks like this (%.0f such of %.0f reported)", 100*e.Rate, max(e.Near, 1), max(e.Reported, e.Near, 1))
	case e.CoWith != "" && abs(e.Co-e.Global) >= abs(e.Global-e.PD):
		return fmt.Sprintf("called with %s in %.0f%% of its %.0f tasks", e.CoWith, 100*e.CoRate, e.CoTasks)
	case e.Base > 0 && e.Reports > 0:
		return fmt.Sprintf("called in %.0f%% of %.0f reported tasks where the descriptions expected %.0f%%", 100*e.Base, e.Reports, 100*e.Expected)
	}
	return fmt.Sprintf("not called in %.0f reported tasks", e.Reports)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Fitted is what a view's reports say about their own trust, for
// caller's own reports (every identity's with Config.Share;
// docs/learning.md): the spread of servers' offsets (Tau, log-odds) and
// of co-use offsets about them (TauCo), the tools' beta-binomial
// strength, and the correlation of two reports' residuals by cosine
// (Rho, bins of 1/len(Rho) from 0) measured on pairs of total weight
// Pairs.
type Fitted struct {
	Tau, TauCo, KappaTool, Pairs float64
	Rho                          []float64
}

// Fitted is the fit Request uses for caller now; zero without reports.
func (v *View) Fitted(caller string) Fitted {
	if v == nil {
		return Fitted{}
	}
	l := v.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	m := l.models[v.key]
	if m == nil || len(m.recs) == 0 {
		return Fitted{}
	}
	f := v.callerFit(m, caller)
	return Fitted{Tau: f.tau, TauCo: f.tauCo, KappaTool: f.kappaTool, Pairs: f.pairs, Rho: slices.Clone(f.rho[:])}
}

// callerFit is the fit Request uses for caller's own reports now (every
// identity's with Config.Share). The caller holds the learner's lock.
func (v *View) callerFit(m *model, caller string) *fit {
	l := v.l
	now := time.Now()
	key := caller
	if l.cfg.Share {
		key = ""
	}
	own := -1
	if id, ok := m.ids[key]; ok && key != "" {
		own = id
	}
	return v.cachedFit(m, func() []float64 {
		w, _ := m.weights(now, l.cfg, key)
		return w
	}, key, own, now)
}

// Called is at most n catalog server labels that the reports say this
// request may need, most weighed first: the servers called among the
// tasks like this one (each report weighed by its credibility weight) and
// with the server chosen first. The descriptions' candidates are a
// shortlist by score; a server they leave out (the filesystem a task
// needs without saying so) can be lifted by the evidence only if it is
// considered at all, so route adds these to the candidates. Nil on a nil
// Request.
func (r *Request) Called(n int) []int {
	if r == nil || n <= 0 {
		return nil
	}
	r.v.l.mu.RLock()
	defer r.v.l.mu.RUnlock()
	// By catalog slot (View.slotOf).
	weight := map[int32]float64{}
	called := func(p *part) map[int32]float64 {
		out := map[int32]float64{}
		for slot, k := range p.calls {
			if k != 0 {
				out[int32(slot)] += k
			}
		}
		if p.chosen[0] >= 0 {
			for id, a := range p.co[0].in.per {
				if slot, ok := r.v.slotOf[r.m.list[id]]; ok {
					out[slot] += a.o
				}
			}
		}
		return out
	}
	for _, p := range []*part{r.own, r.all} {
		if p != nil {
			for id, k := range called(p) {
				weight[id] += k
			}
		}
	}
	// The others' only as every tally without a group of them has it
	// (Request): one identity alone lifts nothing.
	var least map[int32]float64
	for i, p := range r.alts {
		c := called(p)
		if i == 0 {
			least = c
			continue
		}
		for id, k := range least {
			least[id] = min(k, c[id])
		}
	}
	for id, k := range least {
		weight[id] += k
	}
	type cand struct {
		li int
		w  float64
	}
	var cs []cand
	for slot, w := range weight {
		if w > 0 {
			cs = append(cs, cand{r.v.slotLi[slot], w})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.w != b.w {
			if a.w > b.w {
				return -1
			}
			return 1
		}
		return a.li - b.li
	})
	out := make([]int, 0, min(n, len(cs)))
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.li)
	}
	return out
}

// Offset is one server's fitted offset (Fitted's, per server): the weight
// of the reports that count for it, its calls among them, the calls the
// descriptions expected there, and the shift in log-odds fitted.
type Offset struct {
	Server                            string
	Reports, Calls, Expected, LogOdds float64
}

// Offsets are the servers' offsets the fit Request uses for caller now
// (as Fitted), of the view's catalog servers any report counts for,
// most lowered first; every other server has none. Nil without reports.
func (v *View) Offsets(caller string) []Offset {
	if v == nil {
		return nil
	}
	l := v.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	m := l.models[v.key]
	if m == nil || len(m.recs) == 0 {
		return nil
	}
	f := v.callerFit(m, caller)
	var out []Offset
	for _, s := range v.servers {
		id, ok := m.names[s]
		if !ok {
			continue
		}
		if g, ok := f.glob[id]; ok {
			out = append(out, Offset{Server: s, Reports: g.n, Calls: g.o, Expected: g.e, LogOdds: g.off})
		}
	}
	slices.SortStableFunc(out, func(a, b Offset) int {
		switch {
		case a.LogOdds < b.LogOdds:
			return -1
		case a.LogOdds > b.LogOdds:
			return 1
		}
		return strings.Compare(a.Server, b.Server)
	})
	return out
}
