package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/classifierd/classifierd/analyze"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/session"
)

// The hub REST shape (GET /tools, GET /tools/metrics, POST
// /tools/metrics/reset): RPCs whose google.api.http annotations let the
// HTTP transcoder serve them at the paths and in the JSON hubs call today.

// ListToolsForContext implements ClassifierService.ListToolsForContext:
// the tools of the contexts detected in req.context, or of req.category.
// With neither, or when nothing is detected, tools is empty, filtered is
// false and reason is "no_context_detected".
func (s *Server) ListToolsForContext(ctx context.Context, req *pb.ListToolsForContextRequest) (*pb.ListToolsForContextResponse, error) {
	cur := s.current()
	idx := cur.dom.Index
	var applied []string
	switch {
	case req.GetCategory() != "":
		if err := cur.dom.Limits.CheckText("category", req.GetCategory()); err != nil {
			return nil, s.status(ctx, "ListToolsForContext", err)
		}
		if _, ok := idx.Lookup(index.KindCategory, req.GetCategory()); !ok {
			return nil, s.status(ctx, "ListToolsForContext", fmt.Errorf("%w: category", session.ErrUnknownCategory))
		}
		applied = []string{req.GetCategory()}
	case req.GetContext() != "":
		cs, err := cur.dom.Analyzer.DetectContexts(ctx, req.GetContext())
		if err != nil {
			return nil, s.status(ctx, "ListToolsForContext", err)
		}
		for _, c := range cs {
			applied = append(applied, c.ID)
		}
	}
	all := idx.LabelsOf(index.KindTool)
	meta := &pb.ToolListMetadata{Timestamp: timestamppb.Now(), RequestId: requestID(),
		OriginalCount: int32(len(all)), AppliedContext: applied}
	out := &pb.ListToolsForContextResponse{Tools: []*pb.HubTool{}, Metadata: meta}
	if len(applied) == 0 {
		out.Reason = analyze.NoContextReason
		return out, nil
	}
	selected := session.Tools(idx, applied)
	for _, li := range selected {
		l := &idx.Labels[li]
		var cats []string
		if l.Category != "" {
			cats = []string{l.Category}
		}
		out.Tools = append(out.Tools, &pb.HubTool{Name: l.Name, Description: l.Description, Server: l.Server,
			InputSchema: schemaStruct(l.InputSchema), Contexts: cats, Categories: cats})
	}
	st := s.toolStats(cur, all, selected)
	meta.Filtered = true
	meta.ReturnedCount = st.GetReturnedCount()
	meta.ReductionPercent = st.GetReductionPercent()
	return out, nil
}

// schemaStruct is a tool's JSON Schema as a Struct; a catalog schema that
// is absent or not an object (the catalog loader allows only objects)
// reads as {}.
func schemaStruct(raw json.RawMessage) *structpb.Struct {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	return st
}

// requestID is 16 random bytes in hex, for correlating a hub's log with ours.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// GetToolMetrics implements ClassifierService.GetToolMetrics.
func (s *Server) GetToolMetrics(context.Context, *pb.GetToolMetricsRequest) (*pb.GetToolMetricsResponse, error) {
	w := s.stats.window.snapshot()
	since := timestamppb.New(w.since)
	out := &pb.GetToolMetricsResponse{
		Baseline:  tokenMetrics(w.requests, w.baseline, since),
		Filtered:  tokenMetrics(w.requests, w.returned, since),
		Reduction: "0%",
	}
	if w.baseline > 0 {
		out.Reduction = fmt.Sprintf("%.0f%%", math.Round(100*(1-float64(w.returned)/float64(w.baseline))))
	}
	return out, nil
}

func tokenMetrics(requests, tokens int64, since *timestamppb.Timestamp) *pb.TokenMetrics {
	m := &pb.TokenMetrics{Requests: float64(requests), TotalTokens: float64(tokens), Since: since}
	if requests > 0 {
		m.AvgTokensPerRequest = math.Round(100*float64(tokens)/float64(requests)) / 100
	}
	return m
}

// ResetToolMetrics implements ClassifierService.ResetToolMetrics. GetStats'
// counters since start are not reset.
func (s *Server) ResetToolMetrics(context.Context, *pb.ResetToolMetricsRequest) (*pb.ResetToolMetricsResponse, error) {
	s.stats.window.reset(time.Now())
	return &pb.ResetToolMetricsResponse{}, nil
}

// tokenWindow is GetToolMetrics' counters: tool-list answers and their
// baseline and returned tokens since start or the last reset.
type tokenWindow struct {
	mu                           sync.Mutex
	since                        time.Time
	requests, baseline, returned int64
}

func (w *tokenWindow) add(baseline, returned int64) {
	w.mu.Lock()
	w.requests++
	w.baseline += baseline
	w.returned += returned
	w.mu.Unlock()
}

func (w *tokenWindow) reset(now time.Time) {
	w.mu.Lock()
	w.since, w.requests, w.baseline, w.returned = now, 0, 0, 0
	w.mu.Unlock()
}

type tokenWindowSnapshot struct {
	since                        time.Time
	requests, baseline, returned int64
}

func (w *tokenWindow) snapshot() tokenWindowSnapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return tokenWindowSnapshot{w.since, w.requests, w.baseline, w.returned}
}
