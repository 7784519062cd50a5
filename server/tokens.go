package server

import (
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// toolStats is the token accounting for one tool-list answer: how many
// tools and tokens the client would have sent without routing, and how
// many it sends now.
func (s *Server) toolStats(candidates, selected []int) *pb.ToolStats {
	var total, ret int64
	for _, li := range candidates {
		total += int64(s.toolTokens(li))
	}
	for _, li := range selected {
		ret += int64(s.toolTokens(li))
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
	return st
}

// toolTokens estimates a tool definition's tokens as characters/4 until a
// real tokenizer is wired in.
func (s *Server) toolTokens(li int) int {
	l := &s.cls.Index().Labels[li]
	return (len(l.Name) + len(l.Description) + len(l.InputSchema) + 3) / 4
}
