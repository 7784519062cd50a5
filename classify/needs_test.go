package classify

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// ranked makes a best-first score list of the labels, scores falling by 0.1.
func ranked(labels ...int) []labelScore {
	out := make([]labelScore, len(labels))
	for i, l := range labels {
		out[i] = labelScore{label: l, score: 1 - 0.1*float64(i)}
	}
	return out
}

func TestNeedPicks(t *testing.T) {
	// Overall ranking: labels 0..11 in order. k = 4: two places can be kept
	// ((4+1)/2), labels ranked 1..2 are in anyway (k-slots), the rank
	// limit is 8 (needRankDepth*k).
	overall := ranked(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	anyLabel := func(labelScore) bool { return true }
	cases := []struct {
		name  string
		parts [][]labelScore
		k     int
		ok    func(labelScore) bool
		want  []int
	}{
		{"one part is not a compound request", [][]labelScore{ranked(7)}, 4, anyLabel, nil},
		{"no cut: every label fits", [][]labelScore{ranked(7), ranked(9)}, 12, anyLabel, nil},
		{"each part's first and second are kept", [][]labelScore{ranked(0, 1), ranked(6, 2)}, 4, anyLabel, []int{6, 2}},
		{"a part's best in the answer anyway takes no place", [][]labelScore{ranked(1, 5), ranked(6, 7)}, 4, anyLabel, []int{5, 6}},
		{"every part's best before any part's second", [][]labelScore{ranked(5, 6), ranked(7, 3)}, 4, anyLabel, []int{5, 7}},
		{"below the whole prompt's best 2k: not kept", [][]labelScore{ranked(9, 10), ranked(11, 4)}, 4, anyLabel, []int{4}},
		{"ok filters labels (threshold, selected server)", [][]labelScore{ranked(5, 6), ranked(7, 3)}, 4, func(s labelScore) bool { return s.label != 5 }, []int{7, 6}},
		{"at most half the places, rounded up", [][]labelScore{ranked(4), ranked(5), ranked(6)}, 3, anyLabel, []int{4, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(needPicks(tc.parts, overall, tc.k, tc.ok)))
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("kept %v, want %v", got, want)
			}
		})
	}
}

func TestNeedProbs(t *testing.T) {
	// prob falls with the score and, steeply, with the gap to the best.
	prob := func(score, gap float64) float64 { return math.Max(0, score-2*gap) }
	overall := ranked(0, 1, 2, 3) // scores 1, 0.9, 0.8, 0.7
	parts := [][]labelScore{
		{{label: 3, score: 0.6}, {label: 0, score: 0.5}}, // label 3 is this need's best
		{{label: 1, score: 0.85}},
	}
	got := needProbs(overall, parts, prob)
	for li, want := range map[int]float64{
		0: 1,    // best overall
		1: 0.85, // best of its part (0.85, gap 0) beats 0.9 - 2×0.1
		2: 0.4,  // in no part: 0.8 - 2×0.2
		3: 0.6,  // best of its part (0.6, gap 0) beats 0.7 - 2×0.3
	} {
		if math.Abs(got[li]-want) > 1e-9 {
			t.Errorf("label %d: confidence %v, want %v", li, got[li], want)
		}
	}
}

// needsCatalog has three finance servers that share the words of a long
// finance request and one news server (press), so a prompt asking for both ranks
// news fourth as a whole but first on its news part.
const needsCatalog = `{
 "servers": [
  {"id": "stocks", "description": "stock market share prices portfolio dividends", "tools": [
   {"name": "quote", "description": "stock market share prices portfolio dividends today"}]},
  {"id": "broker", "description": "stock market share prices portfolio trading", "tools": [
   {"name": "trade", "description": "stock market share prices portfolio trading orders"}]},
  {"id": "funds", "description": "stock market share prices portfolio funds", "tools": [
   {"name": "funds", "description": "stock market share prices portfolio funds etf"}]},
  {"id": "press", "description": "latest news headlines world events politics sport weather culture", "tools": [
   {"name": "front_page", "description": "latest news headlines world events politics sport weather culture"}]},
  {"id": "cooking", "description": "recipes cooking dinner", "tools": [
   {"name": "recipe", "description": "recipes cooking dinner ideas"}]}
 ]
}`

func TestRouteKeepsPlacesForEachNeed(t *testing.T) {
	c := bowClassifier(t, parseCatalog(t, needsCatalog), 512, nil)
	ctx := context.Background()
	zero := f32(0)
	route := func(q string, k int) RouteResult {
		t.Helper()
		res, err := c.Route(ctx, RouteQuery{Query: q, MaxServers: k, MaxTools: k, MinConfidence: zero})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ids := func(ss []Scored) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	const compound = "show the stock market share prices of my portfolio dividends and then the latest news headlines please"
	full := route(compound, 5)
	if got := ids(full.Servers); len(got) != 5 || got[3] != "press" {
		t.Fatalf("the whole ranking should put news fourth (behind the finance servers): %v", got)
	}
	cut := route(compound, 3)
	got := ids(cut.Servers)
	if len(got) != 3 || got[0] != full.Servers[0].ID || !slices.Contains(got, "press") {
		t.Fatalf("three servers for a finance-and-news request: %v, want the best finance server first and news kept", got)
	}
	for i := 1; i < len(cut.Servers); i++ {
		if cut.Servers[i].Score > cut.Servers[i-1].Score || cut.Servers[i].Confidence > cut.Servers[i-1].Confidence {
			t.Errorf("servers not ordered by score and confidence: %+v", cut.Servers)
		}
	}
	news := cut.Servers[slices.Index(got, "press")]
	if !strings.HasPrefix(news.Evidence, keptNeed) {
		t.Errorf("news evidence %q does not say it was kept for a separate need", news.Evidence)
	}
	if !slices.ContainsFunc(cut.Tools, func(tl ToolScore) bool { return tl.Name == "front_page" }) {
		t.Errorf("tools %+v: the kept server's tool is missing", cut.Tools)
	}

	// One request (no second part of five words or more) keeps the whole
	// prompt's order: the cut answer is the head of the full one.
	for _, q := range []string{
		"show the stock market share prices of my portfolio dividends",
		"stock market share prices and news", // the parts are too short to be needs
	} {
		full, cut := ids(route(q, 5).Servers), ids(route(q, 3).Servers)
		if !slices.Equal(cut, full[:3]) {
			t.Errorf("%q: cut to 3 %v, want the first three of %v", q, cut, full)
		}
		for _, s := range route(q, 3).Servers {
			if strings.HasPrefix(s.Evidence, keptNeed) {
				t.Errorf("%q: %s marked as kept for a need", q, s.ID)
			}
		}
	}
}
