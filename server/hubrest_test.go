package server

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

func TestListToolsForContext(t *testing.T) {
	c := newClassifierClient(t, false)
	ctx := context.Background()

	t.Run("category", func(t *testing.T) {
		r, err := c.ListToolsForContext(ctx, &pb.ListToolsForContextRequest{Category: "github", UserId: "u"})
		if err != nil {
			t.Fatal(err)
		}
		m := r.GetMetadata()
		if len(r.GetTools()) != 1 || r.GetTools()[0].GetName() != "list_notifications" || !m.GetFiltered() ||
			m.GetOriginalCount() != 3 || m.GetReturnedCount() != 1 || !slices.Equal(m.GetAppliedContext(), []string{"github"}) {
			t.Fatalf("got %v, want github's one tool of 3", r)
		}
		if got := r.GetTools()[0].GetContexts(); !slices.Equal(got, []string{"github"}) {
			t.Fatalf("contexts = %v, want [github]", got)
		}
		if r.GetTools()[0].GetInputSchema() == nil || len(m.GetRequestId()) != 32 || m.GetTimestamp() == nil {
			t.Fatalf("got %v, want a schema object, a request id and a timestamp", r)
		}
	})
	t.Run("context detected", func(t *testing.T) {
		r, err := c.ListToolsForContext(ctx, &pb.ListToolsForContextRequest{Context: "any new github notifications?"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(r.GetMetadata().GetAppliedContext(), "github") || r.GetReason() != "" {
			t.Fatalf("got %v, want the github context", r)
		}
	})
	t.Run("no context", func(t *testing.T) {
		r, err := c.ListToolsForContext(ctx, &pb.ListToolsForContextRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetTools()) != 0 || r.GetMetadata().GetFiltered() || r.GetReason() != "no_context_detected" {
			t.Fatalf("got %v, want no tools, filtered false, no_context_detected", r)
		}
	})
	for _, tc := range []struct {
		name string
		req  *pb.ListToolsForContextRequest
	}{
		{"unknown category", &pb.ListToolsForContextRequest{Category: "nope"}},
		{"long category", &pb.ListToolsForContextRequest{Category: strings.Repeat("a", maxTextBytes+1)}},
		{"long context", &pb.ListToolsForContextRequest{Context: strings.Repeat("a ", maxTextBytes)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ListToolsForContext(ctx, tc.req)
			wantCode(t, err, codes.InvalidArgument)
		})
	}
}

func TestToolMetricsCountAndReset(t *testing.T) {
	c := newClassifierClient(t, false)
	ctx := context.Background()
	for range 2 {
		if _, err := c.ListToolsForContext(ctx, &pb.ListToolsForContextRequest{Category: "github"}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.GetToolMetrics(ctx, &pb.GetToolMetricsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, f := m.GetBaseline(), m.GetFiltered()
	if b.GetRequests() != 2 || f.GetRequests() != 2 || b.GetTotalTokens() <= f.GetTotalTokens() || f.GetTotalTokens() <= 0 {
		t.Fatalf("got %v, want 2 requests each and fewer filtered tokens", m)
	}
	if b.GetAvgTokensPerRequest() != b.GetTotalTokens()/2 {
		t.Fatalf("baseline avg = %v, want total/2 = %v", b.GetAvgTokensPerRequest(), b.GetTotalTokens()/2)
	}
	if !strings.HasSuffix(m.GetReduction(), "%") || m.GetReduction() == "0%" {
		t.Fatalf("reduction = %q, want a non-zero percentage", m.GetReduction())
	}
	before := b.GetSince().AsTime()
	if _, err := c.ResetToolMetrics(ctx, &pb.ResetToolMetricsRequest{}); err != nil {
		t.Fatal(err)
	}
	m, err = c.GetToolMetrics(ctx, &pb.GetToolMetricsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m.GetBaseline().GetRequests() != 0 || m.GetFiltered().GetTotalTokens() != 0 || m.GetReduction() != "0%" ||
		!m.GetBaseline().GetSince().AsTime().After(before) {
		t.Fatalf("after reset = %v, want zeroed counters since now", m)
	}
	st, err := c.GetStats(ctx, &pb.GetStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetToolListAnswers() != 2 {
		t.Fatalf("GetStats tool answers = %d, want 2 (not reset)", st.GetToolListAnswers())
	}
}
