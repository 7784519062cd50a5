package server

import (
	"context"

	"github.com/classifierd/classifierd/analyze"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/session"
)

// AnalyzePrompt implements ClassifierService.AnalyzePrompt: a drop-in for a
// hub's analyze_prompt meta-tool. With a session_id the answer is applied
// to that session's exposure.
func (s *Server) AnalyzePrompt(ctx context.Context, req *pb.AnalyzePromptRequest) (*pb.AnalyzePromptResponse, error) {
	mode := req.GetMode()
	if err := session.CheckMode(mode); err != nil {
		return nil, s.status(ctx, "AnalyzePrompt", err)
	}
	cur := s.current()
	aq := analyze.AnalyzeQuery{Prompt: req.GetPrompt(), Context: req.GetContext(), Valid: req.GetValidCategories()}
	// With learning on, the servers a report of this prompt learns from
	// are described from the analyzer's own pass (one embedding, one
	// scoring): the answer and its description come from one ranking.
	var vec []float32
	var described []learn.Prob
	if cur.dom.Learned != nil {
		aq.Scored = func(ts []rank.Turn, v []float32) {
			vec, described = v, cur.dom.Router.DescribeTurns(ts, v)
		}
	}
	a, err := cur.dom.Analyzer.Analyze(ctx, aq)
	if err != nil {
		return nil, s.status(ctx, "AnalyzePrompt", err)
	}
	if a.Degraded {
		s.stats.degraded.Add(1)
		s.log.Warn("analyze_prompt answered from keywords: inference failed")
	}
	out := &pb.AnalyzePromptResponse{
		Categories: a.Categories, Confidence: float32(a.Confidence), Reasoning: a.Reasoning,
		Warning: a.Warning, Suggestion: a.Suggestion, NextStep: a.NextStep, Degraded: a.Degraded,
		IgnoredCategories: a.Ignored, Scores: scoredLabels(a.Scores),
	}
	if vec != nil && !a.Degraded {
		// The prompt's vector and the servers its description ranks
		// first, for a report of what it led to.
		out.RequestId = s.observe(ctx, cur, vec, described)
	}
	traceAnswer(ctx, cur, answerTrace{textBytes: len(req.GetPrompt()) + len(req.GetContext()), results: len(a.Categories),
		abstained: len(a.Categories) == 0, degraded: a.Degraded, top: float32(a.Confidence)})
	if req.GetSessionId() != "" {
		if err := s.applyAnalysis(ctx, req.GetSessionId(), a.Categories, mode, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DetectContexts implements ClassifierService.DetectContexts.
func (s *Server) DetectContexts(ctx context.Context, req *pb.DetectContextsRequest) (*pb.DetectContextsResponse, error) {
	cs, err := s.current().dom.Analyzer.DetectContexts(ctx, req.GetText())
	if err != nil {
		return nil, s.status(ctx, "DetectContexts", err)
	}
	out := &pb.DetectContextsResponse{}
	for _, c := range cs {
		out.Contexts = append(out.Contexts, &pb.DetectedContext{Id: c.ID, Confidence: float32(c.Confidence), EvidenceKind: c.Kind, Evidence: c.Evidence})
	}
	if len(out.Contexts) == 0 {
		out.Reason = analyze.NoContextReason
	}
	return out, nil
}
