package rank

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testindex"
)

// bigCatalog has servers×10 tools whose texts mix a few hundred words, so
// a bag-of-words embedding spreads them over many cells.
func bigCatalog(servers int) *catalog.Catalog {
	rng := rand.New(rand.NewPCG(7, 7))
	words := make([]string, 400)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	text := func(n int) string {
		s := words[rng.IntN(len(words))]
		for i := 1; i < n; i++ {
			s += " " + words[rng.IntN(len(words))]
		}
		return s
	}
	cat := &catalog.Catalog{Categories: []catalog.Category{{ID: "meta", Description: "meta tools help"}, {ID: "data", Description: text(6)}}}
	for s := 0; s < servers; s++ {
		srv := catalog.Server{ID: fmt.Sprintf("srv%d", s), Description: text(8), Categories: []string{"data"}}
		for t := 0; t < 10; t++ {
			srv.Tools = append(srv.Tools, catalog.Tool{Name: fmt.Sprintf("tool_%d_%d", s, t), Description: text(10),
				Examples: []string{text(6)}})
		}
		cat.Servers = append(cat.Servers, srv)
	}
	return cat
}

func shortlistRankers(t *testing.T, cat *catalog.Catalog) (exact, short *Ranker) {
	t.Helper()
	idx := testindex.Build(t, cat, 128)
	f := calibrate.DefaultCalibration().Fusion
	exact, err := New(idx, testindex.Embedder{Dims: 128}, Options{Fusion: f})
	if err != nil {
		t.Fatal(err)
	}
	short, err = New(idx, testindex.Embedder{Dims: 128}, Options{Fusion: f, ShortlistFrom: 1})
	if err != nil {
		t.Fatal(err)
	}
	<-short.ShortlistReady()
	if on, cells := short.Shortlists(); !on || cells < 2 {
		t.Fatalf("Shortlists() = %v, %d cells", on, cells)
	}
	if on, _ := exact.Shortlists(); on {
		t.Fatal("a ranker without ShortlistFrom shortlists")
	}
	return exact, short
}

func embedTurns(t *testing.T, r *Ranker, texts ...string) []Turn {
	t.Helper()
	var ts []Turn
	for _, s := range texts {
		ts = append(ts, Turn{Text: s, Weight: 1})
	}
	ts, err := r.Embed(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// A shortlist that reaches every label scores exactly what the full scan
// scores: same servers, tools and categories, same order, same scores.
func TestShortlistCoveringTheCatalogIsExact(t *testing.T) {
	exact, short := shortlistRankers(t, bigCatalog(30)) // 330 vectors: every cell is probed, 300 tools < shortlistNearest
	for _, q := range []string{"w1 w2 w3 w4", "w17 w250 w33", "tool_3_4 please", "w5 w6 and then w7 w8 w9"} {
		srvE, toolE, catE, candE := exact.RouteScores(embedTurns(t, exact, q), nil)
		srvS, toolS, catS, candS := short.RouteScores(embedTurns(t, short, q), nil)
		if !slices.Equal(candE, candS) {
			t.Fatalf("%q: candidates differ", q)
		}
		for name, p := range map[string][2][]Score{"servers": {srvE, srvS}, "tools": {toolE, toolS}, "categories": {catE, catS}} {
			if len(p[0]) != len(p[1]) {
				t.Fatalf("%q: %d %s exact, %d shortlisted", q, len(p[0]), name, len(p[1]))
			}
			for i := range p[0] {
				if p[0][i].Label != p[1][i].Label || p[0][i].Score != p[1][i].Score {
					t.Fatalf("%q: %s[%d] exact %+v, shortlisted %+v", q, name, i, p[0][i], p[1][i])
				}
			}
		}
	}
}

// On a catalog larger than one probe reaches, the shortlist is a subset,
// each label on it is scored exactly as the full scan scores it, the rest
// are unscored, and the nearest tool is on it.
func TestShortlistScoresItsLabelsExactly(t *testing.T) {
	exact, short := shortlistRankers(t, bigCatalog(1200)) // 13,200 vectors
	q := "w10 w20 w30 w40 w50"
	tsE, tsS := embedTurns(t, exact, q), embedTurns(t, short, q)
	sl := tsS[0].sl
	if sl == nil || len(sl.u.labels) >= len(exact.idx.Labels)/2 {
		t.Fatalf("shortlist of %d labels out of %d", len(sl.u.labels), len(exact.idx.Labels))
	}
	e, s := exact.ScoreLabels(exact.tools, tsE), short.ScoreLabels(short.tools, tsS)
	on := 0
	for i, li := range exact.tools {
		switch {
		case sl.has(li):
			on++
			if e[i].Score != s[i].Score {
				t.Fatalf("tool %s: exact %v, shortlisted %v", exact.idx.Labels[li].ID, e[i].Score, s[i].Score)
			}
		case s[i].Score > -1e300:
			t.Fatalf("tool %s is off the shortlist but scored %v", exact.idx.Labels[li].ID, s[i].Score)
		}
	}
	if on == 0 {
		t.Fatal("no tool on the shortlist")
	}
	best := slices.MaxFunc(e, func(a, b Score) int { return cmp.Compare(a.Score, b.Score) })
	if !sl.has(best.Label) {
		t.Fatalf("the best tool %s is not on the shortlist", exact.idx.Labels[best.Label].ID)
	}
	cE, cS := exact.CategoryScores(tsE), short.CategoryScores(tsS)
	for i := range cE {
		if cE[i].Score != cS[i].Score {
			t.Fatalf("category %d: exact %v, shortlisted %v", i, cE[i].Score, cS[i].Score)
		}
	}
}

func TestIVFListsEveryVectorOnce(t *testing.T) {
	idx := testindex.Build(t, bigCatalog(200), 64)
	var vs []int32
	for _, li := range idx.LabelsOf(index.KindTool) {
		l := &idx.Labels[li]
		for v := l.First; v < l.First+l.Count; v++ {
			vs = append(vs, int32(v))
		}
	}
	a, b := newIVF(idx, vs), newIVF(idx, vs)
	var all []int32
	for c, cell := range a.cells {
		if !slices.Equal(cell, b.cells[c]) {
			t.Fatal("two builds of the same index differ")
		}
		all = append(all, cell...)
	}
	slices.Sort(all)
	if !slices.Equal(all, vs) {
		t.Fatalf("cells list %d vectors, want each of %d once", len(all), len(vs))
	}
	q := idx.Vector(int(vs[17]))
	cells := a.probe(q, 50)
	n := 0
	for _, c := range cells {
		n += len(a.cells[c])
	}
	if n < 50 || n-len(a.cells[cells[len(cells)-1]]) >= 50 {
		t.Fatalf("probe for 50 vectors took %d cells holding %d", len(cells), n)
	}
	if !slices.ContainsFunc(cells, func(c int) bool { return slices.Contains(a.cells[c], vs[17]) }) {
		t.Fatal("a vector's own cell is not probed for it")
	}
}

func TestTopKKeepsTheBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		k       int
		repeats bool
	}{{1, false}, {5, true}, {64, false}, {64, true}} {
		k, h := c.k, newTopK(c.k, c.repeats)
		var all []labelScore
		for i := 0; i < 500; i++ {
			x := labelScore{int32(i), rng.Float32()}
			all = append(all, x)
			h.push(x.label, x.score)
		}
		slices.SortFunc(all, func(a, b labelScore) int { return cmp.Compare(b.score, a.score) })
		var want []int
		for _, x := range all[:k] {
			want = append(want, int(x.label))
		}
		if got := h.sorted(); !slices.Equal(got, want) {
			t.Fatalf("k=%d: got %v, want %v", k, got, want)
		}
	}
	// A label pushed again keeps its best score and one place.
	h := newTopK(2, true)
	h.push(1, 0.1)
	h.push(2, 0.5)
	h.push(1, 0.9)
	h.push(1, 0.2)
	h.push(3, 0.3)
	if got := h.sorted(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("got %v, want [1 2]", got)
	}
}

// Until its cells are built, a shortlisting ranker scores every label.
func TestShortlistNotReadyScoresEveryLabel(t *testing.T) {
	exact, short := shortlistRankers(t, bigCatalog(30))
	building := *short
	building.short = &shortlister{ready: make(chan struct{}), labelOf: short.short.labelOf}
	if on, _ := building.Shortlists(); on {
		t.Fatal("Shortlists() before the cells are built")
	}
	ts := embedTurns(t, &building, "w1 w2 w3")
	if ts[0].sl != nil {
		t.Fatal("a turn was shortlisted before the cells were built")
	}
	_, toolE, _, _ := exact.RouteScores(embedTurns(t, exact, "w1 w2 w3"), nil)
	_, toolB, _, _ := building.RouteScores(ts, nil)
	if len(toolE) != len(toolB) || toolE[0] != toolB[0] {
		t.Fatal("a ranker still building its cells ranks otherwise than the exact one")
	}
}

// Released turns' slices serve later requests, zeroed: answers do not
// depend on what was asked before.
func TestReleasedBuffersDoNotLeakIntoLaterRequests(t *testing.T) {
	exact, short := shortlistRankers(t, bigCatalog(1200))
	for _, r := range []*Ranker{exact, short} {
		first := embedTurns(t, r, "w10 w20 w30 w40")
		_, want, _, _ := r.RouteScores(first, nil)
		r.Release(first)
		for _, q := range []string{"w1 w2 w3 and then w11 w12 w13 w14 w15", "w10 w20 w30 w40"} {
			ts := embedTurns(t, r, q)
			_, got, _, _ := r.RouteScores(ts, nil)
			r.Release(ts)
			if q == "w10 w20 w30 w40" && (len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1]) {
				t.Fatalf("the same request ranks otherwise after others were released")
			}
		}
	}
}
