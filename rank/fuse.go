package rank

import (
	"cmp"
	"math"
	"slices"
)

// RouteScores computes the fused server and tool scores for the allowed
// servers (nil: every server), best first. Fit uses it too, so calibration sees exactly what
// Route ranks.
func (r *Ranker) RouteScores(ts []Turn, allowed map[int]bool) (srvS, toolS, catS []Score, cand []int) {
	all, _ := r.RouteScoresParts(ts, allowed, nil)
	return all.Servers, all.Tools, all.Categories, all.Candidates
}

// Routed is RouteScores' answer for one set of turns.
type Routed struct {
	Servers, Tools, Categories []Score
	// Candidates are the allowed tools, scored or not (read-only).
	Candidates []int
}

// RouteScoresParts is RouteScores for ts and, for each i in parts, for
// ts[i] alone (the needs of a compound request), with every label scored
// once per turn: a part's ranking reuses the scores of the first pass.
func (r *Ranker) RouteScoresParts(ts []Turn, allowed map[int]bool, parts []int) (Routed, []Routed) {
	cand, srvLs := r.tools, r.srvs
	var ok []bool // allowed, by label; nil: every server
	if allowed != nil {
		ok = make([]bool, len(r.idx.Labels))
		for li := range allowed {
			ok[li] = true
		}
		cand, srvLs = nil, nil
		for _, li := range r.tools {
			if ok[r.serverOf[li]] {
				cand = append(cand, li)
			}
		}
		for _, li := range r.srvs {
			if ok[li] {
				srvLs = append(srvLs, li)
			}
		}
	}
	// With a shortlist, only the labels of its turns' sets are scored
	// (the others would all be unscored); every allowed tool stays a
	// candidate.
	var sl *shortlisted
	if len(ts) > 0 {
		sl = ts[0].sl
	}
	scored := cand
	if sl != nil {
		scored = filter(sl.u.tools, func(li int) bool { return ok == nil || ok[r.serverOf[li]] })
		srvLs = filter(sl.u.servers, func(li int) bool { return ok == nil || ok[li] })
	}
	// The work is split in two halves run side by side: after the
	// model's run a request has the machine's cores to itself when the
	// daemon is not busy, and each half only reads the ranker and the
	// rows.
	for i := range ts {
		r.readyLex(&ts[i])
	}
	var toolRows, srvRows, catRows []Score
	both(func() { toolRows = r.scoreRows(scored, ts) }, func() { srvRows, catRows = r.scoreRows(srvLs, ts), r.scoreRows(r.cats, ts) })
	var all Routed
	out := make([]Routed, len(parts))
	part := func(k int) {
		ti := parts[k]
		row := func(rows []Score, n int) []Score { return slices.Clone(rows[ti*n : (ti+1)*n]) }
		out[k] = r.route(row(toolRows, len(scored)), row(srvRows, len(srvLs)), row(catRows, len(r.cats)), cand)
	}
	half := (len(parts) + 1) / 2
	both(func() {
		for k := half; k < len(parts); k++ {
			part(k)
		}
	}, func() {
		all = r.route(bestOfRows(toolRows, len(scored), ts), bestOfRows(srvRows, len(srvLs), ts), bestOfRows(catRows, len(r.cats), ts), cand)
		for k := 0; k < half; k++ {
			part(k)
		}
	})
	if len(out) == 0 {
		out = nil
	}
	return all, out
}

// both runs f on a goroutine of its own and g on the caller's, and
// returns when both have.
func both(f, g func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	g()
	<-done
}

// route lifts servers by their best tool and their categories, and tools
// by their server, and sorts both; it owns the slices it is given.
func (r *Ranker) route(toolS, srvS, catS []Score, cand []int) Routed {
	f := r.fusion
	// Maps, not slices by label: at 100,000 tools a shortlisted request
	// scores a few thousand labels, and two slices of every label cost
	// more to clear than the maps cost to fill.
	bestTool := make(map[int]int, len(srvS)) // server label -> 1 + position in toolS of its best tool
	for i, s := range toolS {
		si := r.serverOf[s.Label]
		if b := bestTool[si]; b == 0 || s.Score > toolS[b-1].Score {
			bestTool[si] = i + 1
		}
	}
	// Categories carry the most examples, so they vouch for the servers
	// that serve them.
	catScore := map[string]Score{}
	if f.ServerFromCategory > 0 {
		for _, cs := range catS {
			catScore[r.idx.Labels[cs.Label].ID] = cs
		}
	}
	srvScore := make(map[int]float64, len(srvS))
	for i, s := range srvS {
		if b := bestTool[s.Label]; b > 0 && f.ServerFromTools*toolS[b-1].Score > srvS[i].Score {
			bt := toolS[b-1]
			bt.Score = f.ServerFromTools * bt.Score
			bt.via = bt.Label + 1
			bt.Label = s.Label
			srvS[i] = bt
		}
		// A category vouches for all its servers alike; the server's own
		// match breaks the tie.
		own := srvS[i].Score
		for _, cat := range r.idx.Labels[s.Label].Categories {
			if cs, ok := catScore[cat]; ok {
				v := f.ServerFromCategory*cs.Score + (1-f.ServerFromCategory)*own
				if v > srvS[i].Score {
					cs.Score = v
					cs.via = cs.Label + 1
					cs.Label = s.Label
					srvS[i] = cs
				}
			}
		}
		srvScore[s.Label] = srvS[i].Score
	}
	srvS = SortedByScore(srvS)
	for i := range toolS {
		s := &toolS[i]
		s.Score = (1-f.ToolFromServer)*s.Score + f.ToolFromServer*srvScore[r.serverOf[s.Label]]
	}
	return Routed{Servers: srvS, Tools: SortedByScore(toolS), Categories: catS, Candidates: cand}
}

// SortedByScore returns ls ordered by score, best first, ties in their
// original order. It sorts 64-bit keys (the score rounded to float32,
// then the position) rather than the large structs, with no comparison
// function; scores that round to the same float32 are then put in their
// exact order (rounding keeps order, so only such runs can be out of it).
func SortedByScore(ls []Score) []Score {
	keys := make([]uint64, len(ls))
	for i, s := range ls {
		keys[i] = uint64(descending32(s.Score))<<32 | uint64(i)
	}
	slices.Sort(keys)
	out := make([]Score, len(ls))
	for i, k := range keys {
		out[i] = ls[uint32(k)]
	}
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]>>32 == keys[i]>>32 {
			j++
		}
		if j-i > 1 {
			// In position order already: a stable sort keeps it for ties.
			slices.SortStableFunc(out[i:j], func(a, b Score) int { return cmp.Compare(b.Score, a.Score) })
		}
		i = j
	}
	return out
}

// descending32 maps a score to a key that orders as cmp.Compare orders
// scores, reversed (best first, NaN last), at float32 precision.
func descending32(v float64) uint32 {
	if v != v {
		return math.MaxUint32 // NaN: below every number, as cmp.Compare has it
	}
	b := math.Float32bits(float32(v) + 0) // + 0: -0 is +0, as they compare equal
	if b>>31 == 0 {
		b |= 1 << 31 // positive: above every negative
	} else {
		b = ^b // negative: the larger magnitude, the lower
	}
	return ^b
}
