package learn_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/route"
)

// costCases are the reports BenchmarkRouteManyIdentities stores before
// bob routes: none, one identity's 7,000 (5,000 kept, MaxPerIdentity),
// seven identities' 7,000 (docs/learning.md, "What a request costs"),
// 50 identities' 9,500 (the sixteenth hostile pass: bob's Route p50
// 3.4 → 11.2 ms), and 2,000 identities' 9,500.
var costCases = []struct {
	name       string
	identities int
	reports    int
}{
	{"none", 0, 0},
	{"one-identity-7000", 1, 7000},
	{"seven-identities-7000", 7, 7000},
	{"fifty-identities-9500", 50, 9500},
	{"2000-identities-9500", 2000, 9500},
}

// costReports stores n reports by k identities as learncost10.py makes
// them: a paraphrase of one of the victims' requests, one of the
// catalog's servers called, every server shown.
func costReports(b testing.TB, f *fixture, k, n int) {
	rnd := rand.New(rand.NewSource(1))
	servers := []string{"github", "filesystem", "jira", "meta"}
	for i := 0; i < n; i++ {
		v := victim[rnd.Intn(len(victim))]
		f.reportShown(b, fmt.Sprintf("token:m%d", i%k), fmt.Sprintf("%s (%d)", v.q, i), servers[rnd.Intn(len(servers))], servers...)
	}
}

// BenchmarkRouteManyIdentities is bob's Route (no reports of his own)
// after each of costCases, with its p50 and p99 beside the mean: a
// Route's learning cost should not grow with how many identities
// reported, only (and little) with the reports stored.
func BenchmarkRouteManyIdentities(b *testing.B) {
	for _, c := range costCases {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
			if c.reports > 0 {
				costReports(b, f, c.identities, c.reports)
			}
			for i := 0; i < 20; i++ { // bob's fits, once
				ranked(b, f.rt, "token:bob", fmt.Sprintf("%s %d", victim[i%len(victim)].q, i))
			}
			lat := make([]time.Duration, 0, b.N)
			zero := float32(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t := time.Now()
				if _, err := f.rt.Route(context.Background(), route.RouteQuery{Query: fmt.Sprintf("%s %d", victim[i%len(victim)].q, i), MinConfidence: &zero, Caller: "token:bob"}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
		})
	}
}

// manyIdentities stores the reports of 50 identities: three heavy ones
// (120 each) and 47 of 25, each calling the victim's right server (one
// in six jira instead), shown both and filesystem; bob and alice report
// a few of their own. The identities agree, so the others' evidence
// moves every caller's answers. Reports
// do not fade (HalfLife -1), so answers asked moments apart compare.
func manyIdentities(t *testing.T, share bool) *fixture {
	t.Helper()
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30, HalfLife: -1, Share: share}, nil)
	rnd := rand.New(rand.NewSource(7))
	report := func(who string, i int) {
		v := victim[rnd.Intn(len(victim))]
		called := v.right
		if rnd.Intn(6) == 0 {
			called = "jira"
		}
		f.reportShown(t, who, fmt.Sprintf("%s (%s %d)", v.q, who, i), called, v.right, "jira", "filesystem")
	}
	for i := 0; i < 120; i++ {
		for k := 0; k < 50; k++ {
			if k < 3 || i < 25 {
				report(fmt.Sprintf("token:m%d", k), i)
			}
		}
		if i%10 == 0 {
			report("token:bob", i)
			report("token:alice", i)
		}
	}
	return f
}

// Each tally's ranking is cut on its own (newRanking), and every tally
// takes as the tasks like this one exactly the records a sort of every
// record would have it take (main's ranking, widened to every record
// when a tally found too few above its shared cut): for a caller with
// reports of his own, one without, and one of the heavy reporters, with
// and without --learn-share, for requests near the reports and far from
// them. What the tallies take is all a request reads of the ranking, so
// the answers are main's.
func TestManyIdentitiesNearestAsSortingAll(t *testing.T) {
	for _, share := range []bool{false, true} {
		f := manyIdentities(t, share)
		took := 0
		for _, caller := range []string{"token:bob", "token:carol", "token:m0"} {
			for _, q := range append(slices.Clone(queries), victim[0].q, victim[1].q, victim[2].q+" for bob") {
				vec, _ := f.describe(t, q)
				got, brute := learn.Nearest(f.view.Request(caller, vec, nil, nil))
				if len(got) == 0 {
					t.Fatalf("share %v, %s, %q: no tallies", share, caller, q)
				}
				for g := range got {
					if !slices.Equal(got[g], brute[g]) {
						t.Errorf("share %v, %s, %q, tally %d: took %d records %v, a sort of every record %d %v",
							share, caller, q, g, len(got[g]), got[g], len(brute[g]), brute[g])
					}
					took += len(got[g])
				}
			}
		}
		if took == 0 {
			t.Fatalf("share %v: no tally took anything: the test compares nothing", share)
		}
	}
}

// Identities whose reports weigh more than IdentityCap all weigh the
// cap, and tie: a request's groups of the others (the three weighing
// most left out one by one, the rest together) go by name among them,
// the same from one request to the next. Ranked by the rounding of a
// sum of their scaled weights, which moved with the clock, the groups
// changed between requests, and each new group was a fit of every
// report made on a Route (seven identities' 7,000 reports: 10 fits in
// 500 of bob's Routes, each of every report).
func TestCappedIdentitiesKeepTheirGroups(t *testing.T) {
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30, IdentityCap: 20}, nil)
	for i := 0; i < 7*60; i++ {
		v := victim[i%len(victim)]
		f.reportShown(t, fmt.Sprintf("token:h%d", i%7), fmt.Sprintf("%s (%d)", v.q, i), v.right, v.right, "jira")
	}
	ranked(t, f.rt, "token:bob", victim[0].q)
	want := learn.FitKeys(f.view)
	if len(want) != 4 {
		t.Fatalf("bob's Route kept %d fits, want 4 (three identities left out one by one, the rest together)", len(want))
	}
	for i := 0; i < 100; i++ {
		ranked(t, f.rt, "token:bob", fmt.Sprintf("%s %d", victim[i%len(victim)].q, i))
	}
	if got := learn.FitKeys(f.view); !slices.Equal(got, want) {
		t.Errorf("after 100 of bob's Routes with no report between, %d fits kept (%d new groups), want the first 4", len(got), len(got)-len(want))
	}
}
