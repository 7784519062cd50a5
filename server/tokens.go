package server

import (
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
)

// toolStats is the token accounting for one tool-list answer: how many
// tools and tokens the client would have sent without routing, and how
// many it sends now.
func (s *Server) toolStats(cur *served, candidates, selected []int) *pb.ToolStats {
	var total, ret int64
	if len(candidates) == cur.tools { // every tool
		total = cur.allTok
	} else {
		for _, li := range candidates {
			total += int64(cur.toolTok[li])
		}
	}
	for _, li := range selected {
		ret += int64(cur.toolTok[li])
	}
	st := &pb.ToolStats{TotalTools: int32(len(candidates)), SelectedTools: int32(len(selected)),
		OriginalCount: int32(len(candidates)), ReturnedCount: int32(len(selected)),
		TokensTotal: total, TokensReturned: ret}
	if len(candidates) > 0 {
		st.ReductionPercent = float32(100 * (1 - float64(len(selected))/float64(len(candidates))))
	}
	s.stats.toolAnswers.Add(1)
	s.stats.baseline.Add(total)
	s.stats.returned.Add(ret)
	s.stats.window.add(total, ret)
	return st
}

// countToolTokens counts every tool definition of the index with the
// configured counter, or estimates characters/4 without one; once per
// loaded index.
func countToolTokens(dom Domain, tc TokenCounter) map[int]int {
	idx := dom.Index
	out := map[int]int{}
	for _, li := range idx.LabelsOf(index.KindTool) {
		l := &idx.Labels[li]
		if tc != nil {
			out[li] = tc.CountTool(l.Name, l.Description, string(l.InputSchema))
		} else {
			out[li] = (len(l.Name) + len(l.Description) + len(l.InputSchema) + 3) / 4
		}
	}
	return out
}
