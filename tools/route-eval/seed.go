package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/classifierd/classifierd/analyze"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/server"
)

// seedCheck is one check of the hub's contract on its own sparse catalog.
type seedCheck struct {
	name string
	ok   bool
	got  string
}

// seedContract runs the hub's contract on the seed-style catalog (its
// eleven categories with a description and two examples each): a clear
// GitHub request exposes github alone, a vague one answers meta below 0.5,
// small talk touches no context. cmd/classifierd's TestSeedContract
// asserts the same through the daemon.
func seedContract(ctx context.Context, path string, emb labels.Embedder, m labels.Model) ([]seedCheck, error) {
	cat, err := catalog.Load(path)
	if err != nil {
		return nil, err
	}
	idx, err := indexbuild.Build(ctx, cat, emb, m, indexbuild.Options{Embedding: labels.Options{Generator: "route-eval seed"}})
	if err != nil {
		return nil, err
	}
	dom, err := server.NewDomainConfig(idx, emb, server.DomainConfig{})
	if err != nil {
		return nil, err
	}
	an := dom.Analyzer
	var out []seedCheck
	a, err := an.Analyze(ctx, analyze.AnalyzeQuery{Prompt: "Check my GitHub notifications and list recent issues"})
	if err != nil {
		return nil, err
	}
	out = append(out, seedCheck{"GitHub request exposes github alone", slices.Equal(a.Categories, []string{"github"}), describe(a)})
	a, err = an.Analyze(ctx, analyze.AnalyzeQuery{Prompt: "Help me with my project"})
	if err != nil {
		return nil, err
	}
	out = append(out, seedCheck{"vague request answers meta below 0.5", len(a.Categories) > 0 && a.Categories[0] == "meta" && a.Confidence < 0.5, describe(a)})
	cs, err := an.DetectContexts(ctx, "what a lovely day")
	if err != nil {
		return nil, err
	}
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s %.2f", c.ID, c.Confidence))
	}
	out = append(out, seedCheck{"small talk touches no context", len(cs) == 0, "[" + strings.Join(got, ", ") + "]"})
	return out, nil
}

func describe(a analyze.Analysis) string {
	var b strings.Builder
	fmt.Fprintf(&b, "categories %v confidence %.2f", a.Categories, a.Confidence)
	for _, s := range a.Scores {
		fmt.Fprintf(&b, "; %s %.2f", s.ID, s.Confidence)
	}
	return b.String()
}

func printSeed(w io.Writer, checks []seedCheck) {
	fmt.Fprintln(w, "== seed contract (cmd/classifierd/testdata/seed.json: eleven categories, a description and two examples each)")
	for _, c := range checks {
		mark := "FAIL"
		if c.ok {
			mark = "ok  "
		}
		fmt.Fprintf(w, "  %s %s: %s\n", mark, c.name, c.got)
	}
}
