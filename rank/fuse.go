package rank

import (
	"cmp"
	"slices"
)

// RouteScores computes the fused server and tool scores for the allowed
// servers, best first. Fit uses it too, so calibration sees exactly what
// Route ranks.
func (r *Ranker) RouteScores(ts []Turn, allowed map[int]bool) (srvS, toolS, catS []Score, cand []int) {
	f := r.fusion
	ok := make([]bool, len(r.idx.Labels)) // allowed, by label
	for li := range allowed {
		ok[li] = true
	}
	for _, li := range r.tools {
		if ok[r.serverOf[li]] {
			cand = append(cand, li)
		}
	}
	toolS = r.ScoreLabels(cand, ts)
	bestTool := make([]int, len(r.idx.Labels)) // server label -> 1 + position in toolS of its best tool
	for i, s := range toolS {
		si := r.serverOf[s.Label]
		if b := bestTool[si]; b == 0 || s.Score > toolS[b-1].Score {
			bestTool[si] = i + 1
		}
	}
	var srvLs []int
	for _, li := range r.srvs {
		if ok[li] {
			srvLs = append(srvLs, li)
		}
	}
	srvS = r.ScoreLabels(srvLs, ts)
	// Categories carry the most examples, so they vouch for the servers
	// that serve them.
	catS = r.CategoryScores(ts)
	catScore := map[string]Score{}
	if f.ServerFromCategory > 0 {
		for _, cs := range catS {
			catScore[r.idx.Labels[cs.Label].ID] = cs
		}
	}
	srvScore := make([]float64, len(r.idx.Labels))
	for i, s := range srvS {
		if b := bestTool[s.Label]; b > 0 && f.ServerFromTools*toolS[b-1].Score > srvS[i].Score {
			bt := toolS[b-1]
			bt.Score = f.ServerFromTools * bt.Score
			bt.Via = "tool " + r.idx.Labels[bt.Label].Name + ": "
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
					cs.Via = "category " + cat + ": "
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
	return srvS, SortedByScore(toolS), catS, cand
}

// SortedByScore returns ls ordered by score, best first, ties in their
// original order. It sorts positions rather than the (large) structs.
func SortedByScore(ls []Score) []Score {
	order := make([]int32, len(ls))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(ls[b].Score, ls[a].Score) })
	out := make([]Score, len(ls))
	for i, j := range order {
		out[i] = ls[j]
	}
	return out
}
