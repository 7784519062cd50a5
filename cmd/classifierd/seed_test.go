package main

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// TestSeedContract is the hub's contract on its own sparse catalog
// (testdata/seed.json: eleven categories, a description and two examples
// each), through the real daemon and model: a clear GitHub request exposes
// github alone (not git, jira, memory and communication beside it), a
// vague request answers meta below 0.5, small talk touches no context.
// tools/route-eval prints the same checks (make eval).
func TestSeedContract(t *testing.T) {
	seed, err := filepath.Abs(filepath.Join("testdata", "seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, conn := startDaemon(t, genIndex(t, seed))
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("GitHub request exposes github alone", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Check my GitHub notifications and list recent issues"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.GetCategories(), []string{"github"}) {
			t.Fatalf("categories %v (confidence %.2f), want [github]", r.GetCategories(), r.GetConfidence())
		}
	})
	t.Run("vague request answers meta below 0.5", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Help me with my project"})
		if err != nil {
			t.Fatal(err)
		}
		if cats := r.GetCategories(); len(cats) == 0 || cats[0] != "meta" || r.GetConfidence() >= 0.5 {
			t.Fatalf("categories %v confidence %.2f, want meta first below 0.5", cats, r.GetConfidence())
		}
	})
	t.Run("small talk touches no context", func(t *testing.T) {
		r, err := c.DetectContexts(ctx, &pb.DetectContextsRequest{Text: "what a lovely day"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetContexts()) != 0 {
			t.Fatalf("contexts %v, want none", r.GetContexts())
		}
	})
}
