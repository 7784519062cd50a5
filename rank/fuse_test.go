package rank

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testindex"
)

// TestRouteScoresPartsMatchScoringEachPartAlone checks that ranking a
// compound request's parts from the first pass's per-turn scores gives
// what scoring each part alone gives.
func TestRouteScoresPartsMatchScoringEachPartAlone(t *testing.T) {
	r := testRanker(t, testindex.Parse(t, breadthCatalog), 256)
	ts := Needs("convert usd to eur for me and then find a cheap gaming laptop for the trip")
	if len(ts) < 3 {
		t.Fatalf("%d turns, want the prompt and two parts", len(ts))
	}
	ts, err := r.Embed(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	parts := []int{1, 2}
	all, got := r.RouteScoresParts(ts, r.AllServers(), parts)
	srv, tools, cats, cand := r.RouteScores(ts, r.AllServers())
	if want := (Routed{srv, tools, cats, cand}); !reflect.DeepEqual(all, want) {
		t.Errorf("whole request: got %+v, want %+v", all, want)
	}
	if len(got) != len(parts) {
		t.Fatalf("%d part rankings, want %d", len(got), len(parts))
	}
	for k, ti := range parts {
		srv, tools, cats, cand := r.RouteScores(ts[ti:ti+1], r.AllServers())
		if want := (Routed{srv, tools, cats, cand}); !reflect.DeepEqual(got[k], want) {
			t.Errorf("part %q: got %+v, want %+v", ts[ti].Text, got[k], want)
		}
	}
	if got[0].Tools[0].Label == got[1].Tools[0].Label {
		t.Errorf("both parts rank %d first; the parts ask for different tools", got[0].Tools[0].Label)
	}
}

// TestMayContainNeverHidesAMatch checks the word-set prefilter of long
// texts against the plain search: it may only rule out needles that
// containsWord would not find.
func TestMayContainNeverHidesAMatch(t *testing.T) {
	text := strings.Repeat("2026-11-23 worker[3] list_issues done; see Songkick concert, c++ and .json files. ", 20) + "Ünïcode wörds"
	needles := []string{"list_issues", "songkick concert", "songkick", "concert,", "c++", ".json", "json", "worker[3]",
		"worker", "work", "issues", "list", "ünïcode wörds", "wörds", "see songkick", "done; see", "zzz", "3]", "2026-11"}
	tu := Turn{Text: text}
	tu.prepare()
	if len(tu.lower) < wordSetMin {
		t.Fatalf("text of %d bytes does not exercise the word set (from %d)", len(tu.lower), wordSetMin)
	}
	ruledOut := 0
	for _, s := range needles {
		n := newNeedle(s)
		want := containsWord(tu.lower, s)
		if got := tu.mayContain(n); !got && want {
			t.Errorf("mayContain(%q) = false, but containsWord finds it", s)
		} else if !got {
			ruledOut++
		}
	}
	if ruledOut == 0 {
		t.Error("the prefilter ruled out no needle; it must rule out those whose words are absent (zzz, work)")
	}
}

// TestLexiconScanMatchesEveryLabel checks that looking up only the labels
// a text's words point to finds the same evidence as matching every label.
func TestLexiconScanMatchesEveryLabel(t *testing.T) {
	cat, err := catalog.Load(filepath.Join(testenv.RepoRoot(), "data/catalogs/default.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := testRanker(t, cat, 64)
	hits := 0
	for _, text := range []string{
		"check my github notifications and open PROJ-123 in jira",
		"post it in #ops on Slack, then list_issues for the repo",
		"read ~/notes.txt, convert 20 usd to eur; ++ weird :: input",
		strings.Repeat("2026-11-23 INFO worker done ", 60) + "send an email to sam@example.com about the postgres outage",
	} {
		tu := Turn{Text: text}
		tu.prepare()
		for li := range r.idx.Labels {
			want := r.lx.match(li, &tu)
			boost, ev := r.lx.evidence(li, &tu, &r.fusion)
			if ev != want.evidence || (want.kind == lexNone) != (boost == 0) {
				t.Errorf("%q, label %s: evidence %q (boost %v), want %q", text[:20], r.idx.Labels[li].ID, ev, boost, want.evidence)
			}
			if want.kind != lexNone {
				hits++
			}
		}
	}
	if hits < 4 {
		t.Errorf("%d lexical hits over the texts; the test needs some to compare", hits)
	}
}

// sortedByScoreReference is SortedByScore's meaning: a stable sort by
// score, best first.
func sortedByScoreReference(ls []Score) []Score {
	out := slices.Clone(ls)
	slices.SortStableFunc(out, func(a, b Score) int { return cmp.Compare(b.Score, a.Score) })
	return out
}

func TestSortedByScoreIsAStableSortByScore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1, -1,
		1 + 1e-12, 1 - 1e-12, -1 - 1e-12, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64}
	for trial := range 500 {
		n := rng.IntN(200)
		ls := make([]Score, n)
		for i := range ls {
			switch rng.IntN(3) {
			case 0:
				ls[i].Score = special[rng.IntN(len(special))]
			case 1: // near-ties that round to one float32
				ls[i].Score = 0.5 + float64(rng.IntN(5))*1e-11
			default:
				ls[i].Score = rng.NormFloat64()
			}
			ls[i].Label = i
		}
		got, want := SortedByScore(ls), sortedByScoreReference(ls)
		for i := range want {
			if got[i].Label != want[i].Label {
				t.Fatalf("trial %d: position %d holds label %d (score %v), want label %d (score %v)",
					trial, i, got[i].Label, got[i].Score, want[i].Label, want[i].Score)
			}
		}
	}
}

func BenchmarkSortedByScore(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ls := make([]Score, 3000)
	for i := range ls {
		ls[i] = Score{Label: i, Score: rng.NormFloat64()}
	}
	b.Run("keys", func(b *testing.B) {
		for b.Loop() {
			SortedByScore(ls)
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			sortedByScoreReference(ls)
		}
	})
}
