package analyze

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/internal/testrank"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

func newTestAnalyzer(t testing.TB, emb rank.Embedder) *Analyzer {
	t.Helper()
	rk := testrank.Ranker(t, testindex.Parse(t, testindex.Catalog), 256, emb)
	return New(rk, testindex.Calibration(), Config{})
}

func TestAnalyze(t *testing.T) {
	ctx := context.Background()
	c := newTestAnalyzer(t, nil)
	t.Run("empty prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "   "})
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Categories) != 1 || a.Categories[0] != "meta" || a.Confidence != 0 || a.Reasoning != EmptyPromptReasoning {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("clear prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "check github notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Categories[0] != "github" || a.Confidence < 0.7 || !strings.HasPrefix(a.NextStep, "proceed") || a.Warning != "" {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("several needs", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "read the config json file and create a github issue"})
		if err != nil {
			t.Fatal(err)
		}
		if !contains(a.Categories, "github") || !contains(a.Categories, "filesystem") {
			t.Fatalf("got %v", a.Categories)
		}
	})
	t.Run("vague prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "bake a chocolate cake"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Categories[0] != "meta" || a.Confidence >= 0.5 || a.Warning == "" || a.Suggestion == "" || !strings.HasPrefix(a.NextStep, "be more specific") {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("valid categories restrict and unknown names warn", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "check github notifications", Valid: []string{"filesystem", "jira", "bogus"}})
		if err != nil {
			t.Fatal(err)
		}
		if contains(a.Categories, "github") || !contains(a.Ignored, "bogus") || !strings.Contains(a.Warning, "bogus") {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("too many valid categories are refused before any work", func(t *testing.T) {
		_, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "check github notifications", Valid: make([]string, request.MaxNames+1)})
		if !errors.Is(err, request.ErrBadArgument) || !strings.Contains(err.Error(), "valid_categories has 1025 names, limit 1024") {
			t.Fatalf("got %v, want ErrBadArgument naming the limit", err)
		}
	})
	t.Run("unknown names are repeated once each, at most MaxIgnored", func(t *testing.T) {
		var valid []string
		for i := range 40 {
			valid = append(valid, fmt.Sprintf("nope-%02d", i), fmt.Sprintf("nope-%02d", i))
		}
		for _, prompt := range []string{"check github notifications", " "} {
			a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: prompt, Valid: append(valid, strings.Repeat("x", 100))})
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Ignored) != MaxIgnored || a.Ignored[0] != "nope-00" || a.Ignored[1] != "nope-01" || !strings.HasSuffix(a.Warning, "nope-15 and 25 more") {
				t.Fatalf("%q: ignored %v, warning %q; want nope-00..nope-15 and 25 more", prompt, a.Ignored, a.Warning)
			}
		}
	})
	t.Run("degraded on inference failure", func(t *testing.T) {
		d := newTestAnalyzer(t, testindex.Embedder{Dims: 256, Fail: errors.New("onnx: boom with secret prompt")})
		a, err := d.Analyze(ctx, AnalyzeQuery{Prompt: "open github.com/acme/repo please"})
		if err != nil {
			t.Fatal(err)
		}
		if !a.Degraded || a.Confidence > 0.4 || !contains(a.Categories, "github") || strings.Contains(a.Reasoning, "secret") {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("context counts less than the prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "read the config json file", Context: "check github notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Categories[0] != "filesystem" {
			t.Fatalf("got %v, want filesystem first", a.Categories)
		}
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestDetectContexts(t *testing.T) {
	c := newTestAnalyzer(t, nil)
	ctx := context.Background()
	cs, err := c.DetectContexts(ctx, "I need to check PROJ-123 ticket comments")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 || cs[0].ID != "jira" || cs[0].Kind != "pattern" || !strings.Contains(cs[0].Evidence, "PROJ-123") {
		t.Fatalf("got %+v", cs)
	}
	cs, err = c.DetectContexts(ctx, "bake a chocolate cake")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Fatalf("got %+v, want none", cs)
	}
}
