package learn_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/route"
)

// reportShown reports that identity called called for text, shown shown.
func (f *fixture) reportShown(t testing.TB, identity, text, called string, shown ...string) {
	t.Helper()
	vec, described := f.describe(t, text)
	if _, err := f.view.Report(context.Background(), learn.Use{Vec: vec, Described: described, Identity: identity,
		Servers: []string{called}, Shown: shown}); err != nil {
		t.Fatal(err)
	}
}

// ranked is caller's servers for q, best first, with their confidences.
func ranked(t testing.TB, rt *route.Router, caller, q string) []classify.Scored {
	t.Helper()
	zero := float32(0)
	res, err := rt.Route(context.Background(), route.RouteQuery{Query: q, MinConfidence: &zero, Caller: caller})
	if err != nil {
		t.Fatal(err)
	}
	return res.Servers
}

// confOf is server id's confidence in ss (0 if absent).
func confOf(ss []classify.Scored, id string) float64 {
	for _, s := range ss {
		if s.ID == id {
			return s.Confidence
		}
	}
	return 0
}

// The victims' requests of the hostile probe (issue #27, seventh pass):
// two reported by mallory in paraphrases, one nobody reported.
var victim = []struct{ q, right string }{
	{"create a github issue for the crash", "github"},
	{"read the config json file", "filesystem"},
	{"open a pull request on github", "github"},
}

// mallory reports n paraphrases of the first two victim requests as
// calling jira, the right server shown and not called.
func mallory(t *testing.T, f *fixture, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v := victim[i%2]
		f.reportShown(t, "token:mallory", fmt.Sprintf("%s (%d)", v.q, i), "jira", v.right, "jira")
	}
}

// honest reports n paraphrases of the first two victim requests as they
// are: the right server called, jira shown.
func honest(t *testing.T, f *fixture, who string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v := victim[i%2]
		f.reportShown(t, who, fmt.Sprintf("%s (%d)", v.q, i), v.right, v.right, "jira")
	}
}

// bound is how far one identity may move another caller's confidence in
// TestOneIdentityCannotMoveAnother.
const bound = 0.05

// One identity's reports, however many, move no other caller's answer
// (bob and carol have no reports; alice has her own) beyond the bound:
// mallory's 80 or 250 targeted reports, with honest reports by another
// identity and without. With --learn-share they do (the test can tell).
func TestOneIdentityCannotMoveAnother(t *testing.T) {
	cfg := learn.Config{Rate: 1e9, Burst: 1 << 30}
	shared := cfg
	shared.Share = true
	for _, tc := range []struct {
		name    string
		cfg     learn.Config
		honest  int
		attacks int
		bounded bool
	}{
		{"80 targeted, with alice's 60 honest", cfg, 60, 80, true},
		{"250 targeted, with alice's 60 honest", cfg, 60, 250, true},
		{"250 targeted, no honest reports", cfg, 0, 250, true},
		{"shared: 250 targeted, with alice's 60 honest", shared, 60, 250, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cfg, nil)
			honest(t, f, "token:alice", tc.honest)
			before := map[string][]classify.Scored{}
			for _, who := range []string{"token:bob", "token:carol"} {
				for _, v := range victim {
					before[who+v.q] = ranked(t, f.rt, who, v.q)
				}
			}
			mallory(t, f, tc.attacks)
			worst, flipped := 0.0, 0
			for _, who := range []string{"token:bob", "token:carol"} {
				for _, v := range victim {
					was, now := before[who+v.q], ranked(t, f.rt, who, v.q)
					if was[0].ID != v.right {
						t.Fatalf("%s %q: %s first before mallory, want %s: the test cannot tell", who, v.q, was[0].ID, v.right)
					}
					if now[0].ID != was[0].ID {
						flipped++
					}
					for _, s := range was {
						worst = max(worst, math.Abs(confOf(now, s.ID)-s.Confidence))
					}
					worst = max(worst, math.Abs(confOf(now, "jira")-confOf(was, "jira")))
					if tc.bounded && (now[0].ID != v.right || worst > bound) {
						t.Errorf("%s %q: %s %.3f first (was %s %.3f); |Δconfidence| up to %.3f, bound %.2f",
							who, v.q, now[0].ID, now[0].Confidence, was[0].ID, was[0].Confidence, worst, bound)
					}
				}
			}
			if !tc.bounded && worst <= bound {
				t.Errorf("shared: mallory moved a confidence by %.3f only: the test cannot tell", worst)
			}
			t.Logf("%d of 6 answers changed their first server; |Δconfidence| at most %.3f", flipped, worst)
		})
	}
}

// A caller's own reports move its own answers whatever another identity
// reports: alice's 60 honest reports hold against mallory's 250.
func TestOwnReportsStillMove(t *testing.T) {
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	const q = "create github issue about the crash"
	bare := confOf(ranked(t, f.bare, "token:alice", q), "filesystem")
	for i := 0; i < 30; i++ {
		f.report(t, "token:alice", fmt.Sprintf("create github issue for the release (%d)", i), "github", "filesystem")
	}
	own := confOf(ranked(t, f.rt, "token:alice", q), "filesystem")
	for i := 0; i < 250; i++ {
		f.reportShown(t, "token:mallory", fmt.Sprintf("create github issue for the release (%d)", i), "jira", "filesystem", "github", "jira")
	}
	after := ranked(t, f.rt, "token:alice", q)
	if own < bare+0.2 {
		t.Errorf("alice's own reports moved filesystem %.3f -> %.3f, want a rise of 0.2 or more", bare, own)
	}
	if got := confOf(after, "filesystem"); math.Abs(got-own) > bound {
		t.Errorf("mallory moved alice's filesystem %.3f -> %.3f, bound %.2f", own, got, bound)
	}
}

// What several identities agree on reaches a caller with no reports of
// its own (the co-use #30 learns from a hub's many reporters), and the
// explanation counts its reports consistently.
func TestAgreeingIdentitiesReachOthers(t *testing.T) {
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	const q = "create github issue about the crash"
	bare := confOf(ranked(t, f.bare, "token:bob", q), "filesystem")
	report := func(who string) {
		for i, text := range []string{"list open pull requests", "check github notifications", "create github issue for the release",
			"comment on the github pull request", "close the github issue"} {
			f.report(t, who, fmt.Sprintf("%s (%d)", text, i), "github", "filesystem")
		}
	}
	report("token:alice")
	alone := ranked(t, f.rt, "token:bob", q)
	if got := confOf(alone, "filesystem"); math.Abs(got-bare) > 1e-9 {
		t.Errorf("one identity's reports moved bob's filesystem %.3f -> %.3f", bare, got)
	}
	for _, s := range alone {
		if strings.Contains(s.Evidence, "learned: ;") {
			t.Errorf("%s: evidence %q has an empty learned part", s.ID, s.Evidence)
		}
	}
	report("token:dave")
	report("token:erin")
	ss := ranked(t, f.rt, "token:bob", q)
	if got := confOf(ss, "filesystem"); got < bare+0.1 {
		t.Errorf("three agreeing identities moved bob's filesystem %.3f -> %.3f, want a rise of 0.1 or more", bare, got)
	}
	for _, s := range ss {
		var such, of float64
		if i := strings.Index(s.Evidence, "such of "); i >= 0 {
			if _, err := fmt.Sscanf(s.Evidence[strings.LastIndex(s.Evidence[:i], "(")+1:], "%g such of %g", &such, &of); err == nil && such > of {
				t.Errorf("%s: %q counts more such tasks than reported", s.ID, s.Evidence)
			}
		}
	}
}

// BenchmarkRouteOthers is Route's cost for a caller with no reports of
// its own, over 2,000 and 8,000 reports by 6 identities: "shared"
// tallies every report once (--learn-share), "per-identity" once without
// each of the three other identities weighing most and without the rest
// (four tallies). Compare them in one run: a Route's cost should not
// grow with the reports stored (the eighth hostile pass).
func BenchmarkRouteOthers(b *testing.B) {
	for _, n := range []int{2000, 8000} {
		for _, share := range []bool{true, false} {
			name := "per-identity"
			if share {
				name = "shared"
			}
			b.Run(fmt.Sprintf("%s/reports=%d", name, n), func(b *testing.B) {
				f := newFixture(b, learn.Config{Rate: 1e9, Burst: 1 << 30, Share: share}, nil)
				for i := 0; i < n; i++ {
					v := victim[i%len(victim)]
					f.reportShown(b, fmt.Sprintf("token:h%d", i%6), fmt.Sprintf("%s (%d)", v.q, i), v.right, v.right, "jira")
				}
				ranked(b, f.rt, "token:bob", victim[0].q) // the fits, once
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ranked(b, f.rt, "token:bob", fmt.Sprintf("%s %d", victim[i%len(victim)].q, i))
				}
			})
		}
	}
}

// A caller's answers with another identity's flood of reports are exactly
// those without it, when it is the only other identity: alice reports
// after mallory's 250, and her fit follows each of her reports as if
// mallory had sent none.
func TestFloodLeavesOwnAnswersExact(t *testing.T) {
	cfg := learn.Config{Rate: 1e9, Burst: 1 << 30}
	clean, dirty := newFixture(t, cfg, nil), newFixture(t, cfg, nil)
	mallory(t, dirty, 250)
	for _, f := range []*fixture{clean, dirty} {
		for i := 0; i < 30; i++ {
			f.report(t, "token:alice", fmt.Sprintf("create github issue for the release (%d)", i), "github", "filesystem")
			ranked(t, f.rt, "token:alice", "create github issue") // a hub routes between reports
		}
	}
	// Equal up to the fading of reports made a moment apart.
	want, got := answers(t, clean.rt, "token:alice"), answers(t, dirty.rt, "token:alice")
	for i := range want {
		g, w := got[i].Servers, want[i].Servers
		same := len(g) == len(w)
		for j := 0; same && j < len(w); j++ {
			same = g[j].ID == w[j].ID && math.Abs(g[j].Confidence-w[j].Confidence) < 1e-9
		}
		if !same {
			t.Errorf("answer %d with mallory's flood differs:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// A request takes at most learn.MaxNear reports per tally as the tasks
// like this one, however many near reports are stored (the eighth
// hostile pass: each Route tallied every report up to five times, 86 ms
// of CPU per Route at 7,000 reports).
func TestRequestTalliesAtMostMaxNear(t *testing.T) {
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	for i := 0; i < 1200; i++ {
		f.reportShown(t, fmt.Sprintf("token:h%d", i%6), fmt.Sprintf("%s (%d)", victim[0].q, i), "jira", victim[0].right, "jira")
	}
	vec, _ := f.describe(t, victim[0].q)
	r := f.view.Request("token:bob", vec, nil, nil)
	sizes := learn.NearSizes(r)
	if len(sizes) != 4 {
		t.Fatalf("%d tallies, want 4 (the three other identities weighing most, and the rest)", len(sizes))
	}
	for i, n := range sizes {
		// Every tally leaves out at most three of the six identities: at
		// least 600 near reports, so exactly MaxNear taken.
		if n != learn.MaxNear {
			t.Errorf("tally %d took %d reports as the tasks like this one, want %d", i, n, learn.MaxNear)
		}
	}
}

// A caller's fit of its own reports is kept while other identities
// report (it counts only changes to its own), and refitted when it
// reports.
func TestOwnFitKeptThroughOthersReports(t *testing.T) {
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	for i := 0; i < 20; i++ {
		f.report(t, "token:alice", fmt.Sprintf("create github issue for the release (%d)", i), "github", "filesystem")
	}
	ranked(t, f.rt, "token:alice", "create github issue")
	before := learn.FitOf(f.view, "token:alice")
	if before == nil {
		t.Fatal("no fit of alice's own reports after her Route")
	}
	for i := 0; i < 300; i++ {
		f.reportShown(t, fmt.Sprintf("token:h%d", i%6), fmt.Sprintf("%s (%d)", victim[1].q, i), "filesystem", "filesystem")
		if i%50 == 0 {
			ranked(t, f.rt, "token:alice", "create github issue")
		}
	}
	ranked(t, f.rt, "token:alice", "create github issue")
	if learn.FitOf(f.view, "token:alice") != before {
		t.Error("alice's own fit was refitted when only others reported")
	}
	f.report(t, "token:alice", "create github issue for the hotfix", "github")
	ranked(t, f.rt, "token:alice", "create github issue")
	if learn.FitOf(f.view, "token:alice") == before {
		t.Error("alice's own fit was not refitted after her own report")
	}
}

// What a tally keeps of each record for the requests near it changes no
// answer: bob's answers with every tally's kept values and with the same
// fits working them out (as a tally past the view's budget does) are the
// same to the last bit, whether the kept values are found by position
// (nothing stored since the fits) or by sequence number (a report stored
// since, itself worked out either way).
func TestKeptNearChangesNothing(t *testing.T) {
	setup := func() *fixture {
		// Reports that do not fade: answers are asked moments apart.
		f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30, HalfLife: -1}, nil)
		for i := 0; i < 600; i++ {
			v := victim[i%len(victim)]
			if i%3 == 0 {
				f.report(t, fmt.Sprintf("token:h%d", i%6), fmt.Sprintf("%s (%d)", v.q, i), v.right, "filesystem")
			} else {
				f.reportShown(t, fmt.Sprintf("token:h%d", i%6), fmt.Sprintf("%s (%d)", v.q, i), v.right, v.right, "jira", "filesystem")
			}
			if i%50 == 0 {
				f.report(t, "token:bob", fmt.Sprintf("%s for bob (%d)", v.q, i), v.right)
			}
		}
		answers(t, f.rt, "token:bob") // the fits
		return f
	}
	same := func(what string, kept, worked []route.RouteResult) {
		t.Helper()
		moved := 0
		for i := range kept {
			k, w := kept[i].Servers, worked[i].Servers
			if len(k) != len(w) {
				t.Fatalf("%s, answer %d: %d servers kept, %d worked out", what, i, len(k), len(w))
			}
			for j := range k {
				if k[j].ID != w[j].ID || k[j].Confidence != w[j].Confidence || k[j].Evidence != w[j].Evidence {
					t.Errorf("%s, answer %d, server %d: kept %+v, worked out %+v", what, i, j, k[j], w[j])
				}
				if k[j].Evidence != "" {
					moved++
				}
			}
		}
		if moved == 0 {
			t.Fatalf("%s: no answer carries learned evidence: the test compares nothing", what)
		}
	}
	// By position: the same reports twice, one kept, one worked out.
	a, b := setup(), setup()
	kept := answers(t, a.rt, "token:bob")
	learn.DropNear(b.view)
	same("nothing stored since the fits", kept, answers(t, b.rt, "token:bob"))
	// By sequence number: stored since the fits, fewer than a hundredth
	// of any fit's reports (the smallest, without three of the six, has
	// 300), so no fit is refitted between the two answers.
	a.reportShown(t, "token:h1", fmt.Sprintf("%s (late)", victim[0].q), "jira", "jira", "github")
	kept = answers(t, a.rt, "token:bob")
	learn.DropNear(a.view)
	same("a report stored since", kept, answers(t, a.rt, "token:bob"))
}

// The view's budget for what tallies keep holds however many callers
// fit: what it counts is what the fits it keeps hold, never above the
// bound, as fits are replaced and evicted (more callers than maxFits).
func TestNearBudgetHolds(t *testing.T) {
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	for i := 0; i < 300; i++ {
		v := victim[i%len(victim)]
		f.reportShown(t, fmt.Sprintf("token:c%d", i%100), fmt.Sprintf("%s (%d)", v.q, i), v.right, v.right, "jira")
	}
	for c := 0; c < 100; c++ {
		ranked(t, f.rt, fmt.Sprintf("token:c%d", c), victim[c%len(victim)].q)
		used, held, max := learn.NearBudget(f.view)
		if used != held || used > max || used < 0 {
			t.Fatalf("after caller %d: budget counts %d bytes, the fits hold %d, bound %d", c, used, held, max)
		}
	}
	if used, _, _ := learn.NearBudget(f.view); used == 0 {
		t.Error("no tally kept anything within the budget")
	}
}
