package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/route"
)

// TestEvaluate runs evaluate on a bag-of-words index, with queries whose
// answers follow from the catalog's own words, and checks the figures it
// reports against counts made by hand.
func TestEvaluate(t *testing.T) {
	ctx := context.Background()
	const dims = 128
	cat := testindex.Parse(t, testindex.FitCatalog)
	idx, err := indexbuild.Build(ctx, cat, testindex.Embedder{Dims: dims}, labels.Model{Name: "bow", Fingerprint: "f", Dims: dims},
		indexbuild.Options{Reference: cat})
	if err != nil {
		t.Fatal(err)
	}
	cal := calibrate.OrDefault(idx.Calibration)
	rk, err := rank.New(idx, testindex.Embedder{Dims: dims}, rank.Options{Fusion: cal.Fusion})
	if err != nil {
		t.Fatal(err)
	}
	cls, rt := classify.New(rk, cal, classify.Config{}), route.New(rk, cal, route.Config{})

	qs := []query{
		// The words of one tool's example and description: that tool first.
		{Text: "rain in paris tomorrow weather forecast", Categories: []string{"weather"}, Servers: []string{"meteo"}, Tools: []string{"meteo/forecast"}, Kind: "single"},
		{Text: "tesla stock quote latest share price", Categories: []string{"stocks"}, Servers: []string{"exchange"}, Tools: []string{"exchange/quote"}, Kind: "single"},
		// Labelled with the other tool of the right server: top-1 wrong, the
		// server right.
		{Text: "any storm warnings storm and heat alerts", Categories: []string{"weather"}, Servers: []string{"meteo"}, Tools: []string{"meteo/forecast"}, Kind: "single"},
		// Two needs, both named.
		{Text: "rain in paris tomorrow and apple share price", Categories: []string{"weather", "stocks"}, Servers: []string{"meteo", "exchange"},
			Tools: []string{"meteo/forecast", "exchange/quote"}, Kind: "multi"},
		// Nothing the catalog knows.
		{Text: "translate this poem into klingon", Kind: "oos"},
	}
	var rep report
	var lines bytes.Buffer
	lat, err := evaluate(ctx, cls, rt, qs, &rep, json.NewEncoder(&lines), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.InScope != 4 || rep.OutScope != 1 || len(lat) == 0 {
		t.Fatalf("in scope %d, out of scope %d, %d latencies; want 4, 1, some", rep.InScope, rep.OutScope, len(lat))
	}
	if rep.Routing == nil || rep.Categories == nil {
		t.Fatalf("report has no routing or category section: %+v", rep)
	}
	// Top-1 tool: right for the first, second and fourth (any gold tool
	// counts for a multi-tool query), wrong for the mislabelled third.
	if got := rep.Routing.ToolTop1; got != 0.75 {
		t.Errorf("tool top-1 = %v, want 0.75 (3 of 4 in-scope queries)", got)
	}
	if got := rep.Routing.ServerRecall["1"]; got != 1 {
		t.Errorf("server recall@1 = %v, want 1", got)
	}
	if got := rep.Routing.MultiQueries; got != 1 {
		t.Errorf("multi-tool queries = %d, want 1", got)
	}
	if got := rep.Routing.MultiFull5; got != 1 {
		t.Errorf("both tools of the two-need query in the top 5: got %v, want 1", got)
	}
	// One result line per query, each with its gold labels.
	got := strings.Split(strings.TrimSpace(lines.String()), "\n")
	if len(got) != len(qs) {
		t.Fatalf("%d result lines, want %d", len(got), len(qs))
	}
	if !strings.Contains(got[2], `"meteo/forecast"`) || !strings.Contains(got[2], `"right":false`) {
		t.Errorf("third result line %s: want its gold tool and right:false", got[2])
	}
}
