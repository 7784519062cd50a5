package route

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

// Deciding from evidence (a catalog without examples, whose calibration
// carries a calibrate.Evidence map learnt across catalogs):
//
//  1. the request's needs are the whole request, each part of a compound
//     request, and each cue (rank.Cues: a path to write to, a URL, a date,
//     arithmetic...), each ranked against the catalog on its own;
//  2. every server near the top of the request or of one of its needs is
//     a candidate, and its evidence (scores, gaps and ranks in the request
//     and in each need, how crowded the catalog is near it, lexical hits,
//     catalog size) is mapped to the probability that the request needs it;
//  3. the answer is the set of candidates that maximises the expected F1
//     under those probabilities (calibrate.BestF1Size), within max_servers; an
//     explicit min_confidence answers every candidate at or above it
//     instead. Where the answer is cut to max_servers, every need keeps a
//     place for its best server (needPicks), and each server's evidence says
//     which need it answers.

// need is one need of a request with its own ranking.
type need struct {
	turn int       // index of its turn
	cue  *rank.Cue // set for a cue
	part bool      // a part of a compound request
	text string    // what the explanation quotes
	rk   rank.Routed
	pos  map[int]int // server label -> position in rk.Servers
	// mean and sd of the need's finite server scores (z within the need).
	mean, sd float64
}

// candidate is one server considered for the answer.
type candidate struct {
	s    rank.Score // its score in the whole request (best over turns)
	x    []float64  // features, in calibrate.EvidenceFeatures order
	p    float64
	need int // index in needs of the need it answers best (0: the request)
}

// evidenceDepth is how many of the request's best servers, and of each
// need's, are candidates (beyond 2×max_servers of the request's).
const (
	evidenceDepth     = 10
	evidenceNeedDepth = 3
	// evidenceNoNeed is the gap, and minus the lead, recorded for a need
	// the server is not scored in, or when the request has no such need.
	evidenceNoNeed = 0.3
	// crowdWidth is how close another server's score must be to count
	// towards crowd.
	crowdWidth = 0.03
	// partMinWords is the fewest words of a part that counts as a need.
	partMinWords = 3
)

// evidenceNeeds lists the needs of ts: the request (turn 0), its parts of
// partMinWords words or more, and its cues.
func evidenceNeeds(ts []rank.Turn) []int {
	out := []int{0}
	for i := 1; i < len(ts); i++ {
		if ts[i].Context {
			continue
		}
		if ts[i].Cue != nil || ts[i].Part && len(strings.Fields(ts[i].Text)) >= partMinWords {
			out = append(out, i)
		}
	}
	return out
}

// candidates computes the candidates of a request and their features.
//
// extra are more server labels to consider (the learned evidence's,
// learnExtra), after the descriptions' own.
func (c *Router) candidates(ts []rank.Turn, all rank.Routed, needIdx []int, needRes []rank.Routed, maxS int, extra []int) ([]candidate, []need) {
	needs := make([]need, len(needIdx))
	for i, ti := range needIdx {
		n := need{turn: ti, cue: ts[ti].Cue, part: ts[ti].Part, rk: needRes[i], pos: make(map[int]int, len(needRes[i].Servers))}
		switch {
		case n.cue != nil:
			n.text = n.cue.Match
		case ti > 0:
			n.text = rank.Clip(ts[ti].Text, 60)
		}
		var fin []float64
		for j, s := range n.rk.Servers {
			n.pos[s.Label] = j
			if !math.IsInf(s.Score, -1) {
				fin = append(fin, s.Score)
			}
		}
		n.mean, n.sd = 0, 1
		if len(fin) > 0 {
			n.mean, n.sd = meanSD(fin)
		}
		needs[i] = n
	}
	srvS := all.Servers
	var finite []float64
	for _, s := range srvS {
		if !math.IsInf(s.Score, -1) {
			finite = append(finite, s.Score)
		}
	}
	if len(finite) == 0 {
		return nil, needs
	}
	mean, sd := meanSD(finite)
	top := srvS[0]
	margin := evidenceNoNeed
	if len(finite) > 1 {
		margin = finite[0] - finite[1]
	}
	pick := map[int]bool{}
	var order []int
	add := func(li int) {
		if !pick[li] {
			pick[li] = true
			order = append(order, li)
		}
	}
	for _, s := range srvS[:min(len(srvS), max(evidenceDepth, 2*maxS))] {
		if !math.IsInf(s.Score, -1) {
			add(s.Label)
		}
	}
	for _, n := range needs[1:] {
		for _, s := range n.rk.Servers[:min(len(n.rk.Servers), evidenceNeedDepth)] {
			if !math.IsInf(s.Score, -1) {
				add(s.Label)
			}
		}
	}
	for _, li := range extra {
		add(li)
	}
	allPos := make(map[int]int, len(srvS))
	for i, s := range srvS {
		allPos[s.Label] = i
	}
	var nParts, nCues float64
	for _, n := range needs[1:] {
		if n.cue != nil {
			nCues++
		} else {
			nParts++
		}
	}
	logServers := math.Log(float64(len(c.Rk.Servers())))
	logWords := math.Log1p(float64(len(strings.Fields(ts[0].Text))))
	out := make([]candidate, 0, len(order))
	for _, li := range order {
		pos, ok := allPos[li]
		if !ok {
			continue // a need's server the request does not allow
		}
		s := srvS[pos]
		x := make([]float64, len(calibrate.EvidenceFeatures))
		set := func(name string, v float64) { x[featureIndex[name]] = v }
		set("score", s.Score)
		set("gap", top.Score-s.Score)
		set("log_rank", math.Log1p(float64(pos)))
		set("first", b2f(pos == 0))
		set("z", (s.Score-mean)/sd)
		set("top_z", (top.Score-mean)/sd)
		set("margin", margin)
		set("crowd", math.Log1p(float64(crowd(finite, s.Score))))
		set("whole_gap", needGap(&needs[0], li))
		partGap, partAdv, cueGap, cueAdv := evidenceNoNeed, -evidenceNoNeed, evidenceNoNeed, -evidenceNoNeed
		var partFirst, cueFirst, cueScore, partZ, cueZ float64
		best, bestRank := 0, needRank(&needs[0], li)
		for k := range needs[1:] {
			n := &needs[k+1]
			g, adv := needGap(n, li), needLead(n, li, top.Label)
			r := needRank(n, li)
			if n.cue != nil {
				cueGap, cueAdv = math.Min(cueGap, g), math.Max(cueAdv, adv)
				if r == 0 {
					cueFirst = 1
				}
				if sc := needScore(n, li); !math.IsInf(sc, -1) {
					cueScore = math.Max(cueScore, sc)
					cueZ = math.Max(cueZ, (sc-n.mean)/n.sd)
				}
			} else {
				partGap, partAdv = math.Min(partGap, g), math.Max(partAdv, adv)
				if r == 0 {
					partFirst = 1
				}
				if sc := needScore(n, li); !math.IsInf(sc, -1) {
					partZ = math.Max(partZ, (sc-n.mean)/n.sd)
				}
			}
			if r < bestRank {
				best, bestRank = k+1, r
			}
		}
		set("part_first", partFirst)
		set("part_gap", partGap)
		set("part_adv", partAdv)
		set("cue_first", cueFirst)
		set("cue_score", cueScore)
		set("cue_gap", cueGap)
		set("cue_adv", cueAdv)
		set("n_parts", nParts)
		set("n_cues", nCues)
		set("lexical", b2f(s.Lex != ""))
		set("log_servers", logServers)
		set("log_tools", math.Log1p(float64(c.toolCount[li])))
		set("log_words", logWords)
		set("part_z", partZ)
		set("cue_z", cueZ)
		set("need_rank", math.Log1p(float64(min(bestRank, len(srvS)))))
		set("need_first", math.Max(partFirst, cueFirst))
		set("need_gap", math.Min(partGap, cueGap))
		set("need_adv", math.Max(partAdv, cueAdv))
		set("need_z", math.Max(partZ, cueZ))
		sh := &c.shape
		set("twin", sh.twin[li])
		set("twin_z", (sh.twin[li]-sh.catTwin)/math.Max(sh.twinSD, 1e-6))
		set("cat_twin", sh.catTwin)
		set("cat_cos", sh.catCos)
		set("cat_words", sh.words)
		calibrate.DeriveEvidence(x)
		out = append(out, candidate{s: s, x: x, need: best})
	}
	return out, needs
}

var featureIndex = func() map[string]int {
	m := map[string]int{}
	for i, n := range calibrate.EvidenceFeatures {
		m[n] = i
	}
	return m
}()

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func meanSD(xs []float64) (float64, float64) {
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	sd := math.Sqrt(v / float64(len(xs)))
	if sd < 1e-6 {
		sd = 1e-6
	}
	return m, sd
}

// crowd counts the scores of sorted (best first) within crowdWidth of v,
// v's own excepted.
func crowd(sorted []float64, v float64) int {
	lo := sort.Search(len(sorted), func(i int) bool { return sorted[i] <= v+crowdWidth })
	hi := sort.Search(len(sorted), func(i int) bool { return sorted[i] < v-crowdWidth })
	return max(0, hi-lo-1)
}

// needScore is li's score in need n (-Inf when not scored there).
func needScore(n *need, li int) float64 {
	if p, ok := n.pos[li]; ok {
		return n.rk.Servers[p].Score
	}
	return math.Inf(-1)
}

// needRank is li's position in need n's ranking (a large number when absent).
func needRank(n *need, li int) int {
	if p, ok := n.pos[li]; ok && !math.IsInf(n.rk.Servers[p].Score, -1) {
		return p
	}
	return math.MaxInt32
}

// needGap is how far li's score falls below need n's best, at most evidenceNoNeed.
func needGap(n *need, li int) float64 {
	s := needScore(n, li)
	if len(n.rk.Servers) == 0 || math.IsInf(s, -1) {
		return evidenceNoNeed
	}
	return math.Min(evidenceNoNeed, n.rk.Servers[0].Score-s)
}

// needLead is how far li's score in need n is above the score there of
// the request's best server top, within ±evidenceNoNeed.
func needLead(n *need, li, top int) float64 {
	s, t := needScore(n, li), needScore(n, top)
	if math.IsInf(s, -1) {
		return -evidenceNoNeed
	}
	if math.IsInf(t, -1) {
		return evidenceNoNeed
	}
	return math.Max(-evidenceNoNeed, math.Min(evidenceNoNeed, s-t))
}

// Considered is one candidate server with its evidence and probability,
// returned when a RouteQuery asks for Evidence (route-eval fits the
// cross-catalog map on them).
type Considered struct {
	Label int
	ID    string
	// X is the evidence in calibrate.EvidenceFeatures order.
	X []float64
	P float64
}

// decide answers a request from the evidence map (see the top of this file).
func (c *Router) decide(ts []rank.Turn, all rank.Routed, needIdx []int, needRes []rank.Routed, maxS, maxT int, q RouteQuery, vec []float32) RouteResult {
	ev := c.Cal.ServerEvidence
	var res RouteResult
	res.Candidates = all.Candidates
	cands, needs := c.candidates(ts, all, needIdx, needRes, maxS, nil)
	for i := range cands {
		cands[i].p = ev.Prob(cands[i].x)
	}
	if extra := c.learnExtra(cands, q, vec, max(evidenceDepth, 2*maxS)); len(extra) > 0 {
		cands, needs = c.candidates(ts, all, needIdx, needRes, maxS, extra)
		for i := range cands {
			cands[i].p = ev.Prob(cands[i].x)
		}
	}
	learned, lr := c.learnCandidates(&res, cands, q, vec)
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if a.p != b.p {
			return cmp.Compare(b.p, a.p)
		}
		return cmp.Compare(b.s.Score, a.s.Score)
	})
	if q.Evidence {
		for _, cd := range cands {
			res.Considered = append(res.Considered, Considered{Label: cd.s.Label, ID: c.Idx.Labels[cd.s.Label].ID, X: cd.x, P: cd.p})
		}
	}
	// Which candidates are eligible: at or above an explicit min_confidence,
	// else the set of best expected F1.
	var n int
	if q.MinConfidence != nil {
		for n < len(cands) && cands[n].p >= float64(*q.MinConfidence) {
			n++
		}
	} else {
		ps := make([]float64, len(cands))
		for i, cd := range cands {
			ps[i] = cd.p
		}
		n = calibrate.BestF1Size(ps, maxS)
	}
	chosen := c.keepNeeds(cands[:n], needs, maxS)
	selected := map[int]bool{}
	for _, cd := range chosen {
		selected[cd.s.Label] = true
		ev, parts := c.Rk.Evidence(cd.s), c.Rk.Parts(cd.s)
		if e, ok := learned[cd.s.Label]; ok && e.Text != "" {
			ev, parts.Learned = "learned: "+e.Text+"; "+ev, e.Text
		}
		if cd.need > 0 {
			nd := &needs[cd.need]
			if nd.cue != nil {
				ev = fmt.Sprintf("answers the need %q (%s); ", nd.text, nd.cue.Kind) + ev
			} else {
				ev = fmt.Sprintf("answers the need %q; ", nd.text) + ev
			}
		}
		res.Servers = append(res.Servers, classify.Scored{Label: cd.s.Label, ID: c.Idx.Labels[cd.s.Label].ID,
			Confidence: cd.p, Score: cd.s.Score, Evidence: ev, Parts: parts})
	}
	c.pickTools(&res, all.Tools, needs, selected, maxT, q, lr, learned)
	c.pickCategories(&res, all.Categories, q)
	if len(res.Servers) == 0 {
		c.applyNoMatch(&res, c.noMatchWhy(cands, q), q.OnNoMatch)
		return res
	}
	top := res.Servers[0]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %.2f: %s", top.ID, top.Confidence, top.Evidence)
	for _, cd := range cands {
		if !selected[cd.s.Label] {
			fmt.Fprintf(&b, "; runner-up %s %.2f", c.Idx.Labels[cd.s.Label].ID, cd.p)
			break
		}
	}
	if q.MinConfidence == nil {
		fmt.Fprintf(&b, "; %d server(s): the set of best expected F1", len(res.Servers))
	}
	res.Reasoning = b.String()
	return res
}

// keepNeeds cuts the eligible candidates (best first) to k, keeping a
// place for the best server of each need (a part or a cue) that is
// eligible but would fall past the cut: at most half the places (rounded
// up), the most probable candidate first, the answer in order of
// probability.
func (c *Router) keepNeeds(elig []candidate, needs []need, k int) []candidate {
	if len(elig) <= k {
		return elig
	}
	pos := map[int]int{}
	for i, cd := range elig {
		pos[cd.s.Label] = i
	}
	slots := (k + 1) / 2
	keep := map[int]bool{}
	for _, n := range needs[1:] {
		if len(keep) >= slots || len(n.rk.Servers) == 0 {
			continue
		}
		if i, ok := pos[n.rk.Servers[0].Label]; ok && i >= k-slots && i > 0 {
			keep[i] = true
		}
	}
	out := make([]candidate, 0, k)
	for i, cd := range elig {
		if len(out) >= k {
			break
		}
		if keep[i] || len(out)+len(keep) < k {
			out = append(out, cd)
			delete(keep, i)
		}
	}
	return out
}

// pickTools adds the tools of the selected servers, best first; every
// selected server brings at least its best tool, and each need brings
// its best tool among the selected servers' (a need to write a file
// brings the server's write tool, not its best tool for the whole request).
func (c *Router) pickTools(res *RouteResult, toolS []rank.Score, needs []need, selected map[int]bool, maxT int, q RouteQuery,
	lr *learn.Request, learnedSrv map[int]learn.Evidence) {
	toolThr := c.Cal.Tools.Threshold
	if q.MinConfidence != nil {
		toolThr = float64(*q.MinConfidence)
	}
	if len(toolS) == 0 {
		return
	}
	toolP := func(s rank.Score) float64 { return c.Cal.Tools.ProbAt(s.Score, toolS[0].Score-s.Score) }
	// Learned evidence (learnDecidedTools) reorders the tools and sets
	// their confidences; with no reports learned is nil.
	toolS, learned := learnDecidedTools(lr, toolS, selected, c.Rk.ServerOf, toolP, learnedSrv)
	if learned != nil {
		descP := toolP
		toolP = func(s rank.Score) float64 {
			if e, ok := learned[s.Label]; ok {
				return e.P
			}
			return descP(s)
		}
	}
	keep := map[int]int{} // tool label -> need
	for k, n := range needs[1:] {
		for _, s := range n.rk.Tools {
			if selected[c.Rk.ServerOf(s.Label)] {
				if _, ok := keep[s.Label]; !ok {
					keep[s.Label] = k + 1
				}
				break
			}
		}
	}
	hasTool := map[int]bool{}
	var out []ToolScore
	kept := 0
	for _, s := range toolS {
		if _, ok := keep[s.Label]; ok {
			kept++
		}
	}
	for _, s := range toolS {
		if len(out) >= maxT {
			break
		}
		si := c.Rk.ServerOf(s.Label)
		if !selected[si] {
			continue
		}
		nd, isKept := keep[s.Label]
		p := toolP(s)
		if !isKept && p < toolThr && hasTool[si] {
			continue
		}
		if !isKept && len(out)+kept >= maxT {
			continue
		}
		tl := c.toolScore(s, p)
		if e, ok := learned[s.Label]; ok && e.Text != "" {
			tl.Evidence, tl.Parts.Learned = "learned: "+e.Text+"; "+tl.Evidence, e.Text
		}
		if isKept {
			kept--
			if n := &needs[nd]; n.text != "" {
				tl.Evidence = fmt.Sprintf("answers the need %q; ", n.text) + tl.Evidence
			}
		}
		hasTool[si] = true
		out = append(out, tl)
	}
	res.Tools = out
}

// pickCategories adds the categories at or above the threshold.
func (c *Router) pickCategories(res *RouteResult, cs []rank.Score, q RouteQuery) {
	if len(c.Rk.Categories()) == 0 {
		return
	}
	thr := c.Cal.CategoriesMulti.Threshold
	if q.MinConfidence != nil {
		thr = float64(*q.MinConfidence)
	}
	cs = rank.SortedByScore(cs)
	for _, s := range cs {
		p := c.Cal.CategoriesMulti.ProbAt(s.Score, cs[0].Score-s.Score)
		if len(res.Categories) >= request.MaxCategories || p < thr {
			break
		}
		res.Categories = append(res.Categories, classify.Scored{Label: s.Label, ID: c.Idx.Labels[s.Label].ID,
			Confidence: p, Score: s.Score, Evidence: c.Rk.Evidence(s), Parts: c.Rk.Parts(s)})
	}
}

// noMatchWhy says why the evidence path answers no server.
func (c *Router) noMatchWhy(cands []candidate, q RouteQuery) string {
	switch {
	case len(cands) == 0:
		return "no servers to route to"
	case q.MinConfidence != nil:
		return fmt.Sprintf("no server reached confidence %.2f (best %s %.2f)", *q.MinConfidence, c.Idx.Labels[cands[0].s.Label].ID, cands[0].p)
	}
	return fmt.Sprintf("the set of best expected F1 is empty (best %s %.2f)", c.Idx.Labels[cands[0].s.Label].ID, cands[0].p)
}

// toolCounts counts each server's tools, by server label.
func toolCounts(rk *rank.Ranker) map[int]int {
	out := map[int]int{}
	for _, t := range rk.Tools() {
		out[rk.ServerOf(t)]++
	}
	return out
}

// learnExtra is at most n servers the learned evidence says this request
// may need (learn.Request.Called) that are not candidates yet: with them
// the evidence can lift a server the descriptions' shortlist left out,
// as it can in route's full ranking. Nil with no reports (the answer is
// then exactly today's) and for Describe.
func (c *Router) learnExtra(cands []candidate, q RouteQuery, vec []float32, n int) []int {
	if c.cfg.Learned == nil || q.describe || len(cands) == 0 {
		return nil
	}
	srvS := make([]rank.Score, len(cands))
	srvP := make(map[int]float64, len(cands))
	for i, cd := range cands {
		srvS[i], srvP[cd.s.Label] = cd.s, cd.p
	}
	var out []int
	for _, li := range c.learned(q.Caller, vec, srvS, srvP).Called(n) {
		if _, ok := srvP[li]; !ok {
			out = append(out, li)
		}
	}
	return out
}

// learnCandidates moves the candidates' probabilities by what callers
// reported (package learn), as route does for the description-based
// ranking: res.Described keeps the probabilities before any learned
// evidence, for learning from what is then called. With no reports, or
// for Describe, nothing changes and the map is nil.
func (c *Router) learnCandidates(res *RouteResult, cands []candidate, q RouteQuery, vec []float32) (map[int]learn.Evidence, *learn.Request) {
	if c.cfg.Learned == nil || len(cands) == 0 {
		return nil, nil
	}
	srvS := make([]rank.Score, len(cands))
	srvP := make(map[int]float64, len(cands))
	for i, cd := range cands {
		srvS[i], srvP[cd.s.Label] = cd.s, cd.p
	}
	res.Described = described(c.Idx, srvS, srvP)
	if q.describe {
		return nil, nil
	}
	lr := c.learned(q.Caller, vec, srvS, srvP)
	if lr == nil {
		return nil, nil
	}
	out := make(map[int]learn.Evidence, len(cands))
	for i, cd := range cands {
		e := lr.Server(cd.s.Label, cd.p)
		out[cd.s.Label] = e
		cands[i].p = e.P
	}
	return out, lr
}

// learnDecidedTools is the learned evidence of the selected servers'
// tools (toolS), reordered by it, for pickTools: a tool's own evidence
// (learn.Request.Tool: its description-based probability toolP moved by
// its share of its server's reported tool calls), moved by the odds
// ratio its server's learned evidence (srv) brings, at most the server's
// probability, as a tool is needed only when its server is. The tools
// are ordered by it, ties in the descriptions' order. With no reports
// (lr nil) nothing changes.
func learnDecidedTools(lr *learn.Request, toolS []rank.Score, selected map[int]bool, serverOf func(int) int,
	toolP func(rank.Score) float64, srv map[int]learn.Evidence) ([]rank.Score, map[int]learn.Evidence) {
	if lr == nil || len(toolS) == 0 {
		return toolS, nil
	}
	ev := map[int]learn.Evidence{}
	var in, out []rank.Score
	for _, s := range toolS {
		si := serverOf(s.Label)
		if !selected[si] {
			out = append(out, s)
			continue
		}
		pd := toolP(s)
		e := lr.Tool(s.Label, pd)
		if se, ok := srv[si]; ok && se.Text != "" {
			// Moved by the odds ratio its server's evidence brings,
			// never above the server's probability.
			e.P = math.Min(se.P, sigmoid(logit(e.P)+logit(se.P)-logit(se.PD)))
			if e.Text == "" {
				e.Text = se.Text
			}
		}
		ev[s.Label] = e
		in = append(in, s)
	}
	// By learned probability; ties (tools at their server's) keep the
	// descriptions' order.
	slices.SortStableFunc(in, func(a, b rank.Score) int { return cmp.Compare(ev[b.Label].P, ev[a.Label].P) })
	return append(in, out...), ev
}

// sigmoid is the probability of log-odds x.
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
