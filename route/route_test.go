package route

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/internal/testrank"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

func newTestRouter(t testing.TB, emb rank.Embedder) *Router {
	t.Helper()
	rk := testrank.Ranker(t, testindex.Parse(t, testindex.Catalog), 256, emb)
	return New(rk, testindex.Calibration(), Config{})
}

// bowRouter routes over cat, indexed with the bag-of-words fake, on the
// prior calibration.
func bowRouter(t testing.TB, cat *catalog.Catalog, dims int) *Router {
	t.Helper()
	return New(testrank.Ranker(t, cat, dims, nil), calibrate.DefaultCalibration(), Config{})
}

func f32(v float32) *float32 { return &v }

func TestRoute(t *testing.T) {
	c := newTestRouter(t, nil)
	ctx := context.Background()
	t.Run("github first", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Query: "check my github notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) == 0 || res.Servers[0].ID != "github" || res.Tools[0].Name != "list_notifications" {
			t.Fatalf("got %+v", res)
		}
		for _, tl := range res.Tools {
			if tl.Server != "github" && !containsServer(res.Servers, tl.Server) {
				t.Fatalf("tool %s/%s from an unselected server", tl.Server, tl.Name)
			}
		}
	})
	t.Run("two needs give two servers", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Query: "read the config json file and create a github issue"})
		if err != nil {
			t.Fatal(err)
		}
		if !containsServer(res.Servers, "github") || !containsServer(res.Servers, "filesystem") {
			t.Fatalf("servers = %+v, want github and filesystem", res.Servers)
		}
	})
	t.Run("include and exclude", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Query: "check my github notifications", Exclude: []string{"github"}, MinConfidence: f32(0)})
		if err != nil {
			t.Fatal(err)
		}
		if containsServer(res.Servers, "github") {
			t.Fatal("excluded server returned")
		}
		res, err = c.Route(ctx, RouteQuery{Query: "check my github notifications", Include: []string{"jira"}, MinConfidence: f32(0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) != 1 || res.Servers[0].ID != "jira" || len(res.Candidates) != 1 {
			t.Fatalf("include jira: %+v", res.Servers)
		}
		if _, err := c.Route(ctx, RouteQuery{Query: "x", Include: []string{"nope"}}); !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("unknown include: %v", err)
		}
	})
	t.Run("no-match policies", func(t *testing.T) {
		for _, tc := range []struct {
			p     NoMatch
			tools int
			want  string
		}{
			{NoMatchDefault, 0, "policy NONE"},
			{NoMatchNone, 0, "policy NONE"},
			{NoMatchMeta, 1, "policy META"},
			{NoMatchAll, 6, "policy ALL"},
		} {
			res, err := c.Route(ctx, RouteQuery{Query: "bake a chocolate cake", OnNoMatch: tc.p})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Abstained || len(res.Tools) != tc.tools || !strings.Contains(res.PolicyReason, tc.want) {
				t.Fatalf("%v: abstained=%v tools=%d reason=%q", tc.p, res.Abstained, len(res.Tools), res.PolicyReason)
			}
			if tc.p == NoMatchMeta && res.Tools[0].Name != "analyze_prompt" {
				t.Fatalf("META returned %v", res.Tools)
			}
		}
	})
	t.Run("follow-up keeps the conversation's server", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Messages: []Message{
			{Role: "user", Content: "check my github notifications"},
			{Role: "assistant", Content: "You have 3 unread github notifications."},
			{Role: "user", Content: "and what about the second one?"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) == 0 || res.Servers[0].ID != "github" || !strings.Contains(res.Servers[0].Evidence, "earlier conversation") {
			t.Fatalf("got %+v", res.Servers)
		}
	})
	t.Run("topic change moves away", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Messages: []Message{
			{Role: "user", Content: "check my github notifications"},
			{Role: "user", Content: "now read the config json file"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) == 0 || res.Servers[0].ID != "filesystem" {
			t.Fatalf("got %+v", res.Servers)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, q := range []RouteQuery{
			{},
			{Messages: []Message{{Role: "assistant", Content: "hi"}}},
			{Query: "x", Messages: []Message{{Role: "robot", Content: "x"}}},
			{Query: "x", MaxTools: -1},
			{Query: "x", MaxServers: 1000},
			{Query: strings.Repeat("y", request.DefaultMaxTextBytes+1)},
		} {
			if _, err := c.Route(ctx, q); err == nil {
				t.Fatalf("%+v: no error", q)
			}
		}
		// A long role is quoted clipped: the thirteenth hostile pass sent a
		// 4 MB role of DEL bytes and got a 20 MB 400.
		_, err := c.Route(ctx, RouteQuery{Query: "x", Messages: []Message{{Role: strings.Repeat("\x7f", 1<<20), Content: "x"}}})
		if err == nil || len(err.Error()) > 1024 {
			t.Fatalf("a 1 MiB role: error of %d bytes, want a short one", len(fmt.Sprint(err)))
		}
	})
}

func containsServer(ss []classify.Scored, id string) bool {
	for _, s := range ss {
		if s.ID == id {
			return true
		}
	}
	return false
}

// ranked makes a best-first score list of the labels, scores falling by 0.1.
func ranked(labels ...int) []rank.Score {
	out := make([]rank.Score, len(labels))
	for i, l := range labels {
		out[i] = rank.Score{Label: l, Score: 1 - 0.1*float64(i)}
	}
	return out
}

func TestNeedPicks(t *testing.T) {
	// Overall ranking: labels 0..11 in order. k = 4: two places can be kept
	// ((4+1)/2), labels ranked 1..2 are in anyway (k-slots), the rank
	// limit is 8 (needRankDepth*k).
	overall := ranked(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	anyLabel := func(rank.Score) bool { return true }
	cases := []struct {
		name  string
		parts [][]rank.Score
		k     int
		ok    func(rank.Score) bool
		want  []int
	}{
		{"one part is not a compound request", [][]rank.Score{ranked(7)}, 4, anyLabel, nil},
		{"no cut: every label fits", [][]rank.Score{ranked(7), ranked(9)}, 12, anyLabel, nil},
		{"each part's first and second are kept", [][]rank.Score{ranked(0, 1), ranked(6, 2)}, 4, anyLabel, []int{6, 2}},
		{"a part's best in the answer anyway takes no place", [][]rank.Score{ranked(1, 5), ranked(6, 7)}, 4, anyLabel, []int{5, 6}},
		{"every part's best before any part's second", [][]rank.Score{ranked(5, 6), ranked(7, 3)}, 4, anyLabel, []int{5, 7}},
		{"below the whole prompt's best 2k: not kept", [][]rank.Score{ranked(9, 10), ranked(11, 4)}, 4, anyLabel, []int{4}},
		{"ok filters labels (threshold, selected server)", [][]rank.Score{ranked(5, 6), ranked(7, 3)}, 4, func(s rank.Score) bool { return s.Label != 5 }, []int{7, 6}},
		{"at most half the places, rounded up", [][]rank.Score{ranked(4), ranked(5), ranked(6)}, 3, anyLabel, []int{4, 5}},
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
	parts := [][]rank.Score{
		{{Label: 3, Score: 0.6}, {Label: 0, Score: 0.5}}, // label 3 is this need's best
		{{Label: 1, Score: 0.85}},
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
	c := bowRouter(t, testindex.Parse(t, needsCatalog), 512)
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
	ids := func(ss []classify.Scored) []string {
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
