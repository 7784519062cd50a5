package learn_test

import (
	"context"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/internal/testrank"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/route"
)

const dims = 256

// fixture is an index of the test catalog, a learner and a router that
// uses it.
type fixture struct {
	idx  *index.Index
	l    *learn.Learner
	view *learn.View
	rt   *route.Router
	bare *route.Router // the same index without learning
}

func newFixture(t testing.TB, cfg learn.Config, st learn.Store) *fixture {
	t.Helper()
	rk := testrank.Ranker(t, testindex.Parse(t, testindex.Catalog), dims, nil)
	l, err := learn.New(context.Background(), cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	v := l.View(rk.Index())
	cal := testindex.Calibration()
	return &fixture{idx: rk.Index(), l: l, view: v, rt: route.New(rk, cal, route.Config{Learned: v}), bare: route.New(rk, cal, route.Config{})}
}

// describe is text's vector and the servers its descriptions rank first.
func (f *fixture) describe(t testing.TB, text string) ([]float32, []learn.Prob) {
	t.Helper()
	v, d, err := f.rt.Describe(context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	return v, d
}

func (f *fixture) report(t *testing.T, identity, text string, servers ...string) learn.Result {
	t.Helper()
	vec, described := f.describe(t, text)
	res, err := f.view.Report(context.Background(), learn.Use{Vec: vec, Described: described, Identity: identity, Servers: servers})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var queries = []string{"check github notifications", "read file config json", "show jira ticket ABC-12",
	"create github issue and list files directory", "what can you do", "weather in paris"}

func answers(t *testing.T, rt *route.Router, caller string) []route.RouteResult {
	t.Helper()
	var out []route.RouteResult
	zero := float32(0)
	for _, q := range queries {
		for _, mc := range []*float32{nil, &zero} {
			res, err := rt.Route(context.Background(), route.RouteQuery{Query: q, MinConfidence: mc, Caller: caller})
			if err != nil {
				t.Fatal(err)
			}
			res.Vector, res.Described = nil, nil
			out = append(out, res)
		}
	}
	return out
}

// With no reports for the index's key the answers are exactly those of a
// router without learning: no reports at all, and reports under another
// scope's key.
func TestNoFeedbackExactlyToday(t *testing.T) {
	f := newFixture(t, learn.Config{}, nil)
	want := answers(t, f.bare, "hub")
	if got := answers(t, f.rt, "hub"); !reflect.DeepEqual(got, want) {
		t.Fatalf("no reports: answers differ from a router without learning")
	}
	other := newFixture(t, learn.Config{Scope: "elsewhere"}, nil)
	other.report(t, "hub", "check github notifications", "filesystem", "jira")
	// The same learner, another scope: f's view sees nothing of it.
	if got := answers(t, f.rt, "hub"); !reflect.DeepEqual(got, want) {
		t.Fatalf("reports under another key changed the answers")
	}
	if got := answers(t, other.rt, "hub"); reflect.DeepEqual(got, want) {
		t.Fatalf("reports under the index's key changed nothing: the test cannot tell")
	}
}

// A server every task calls without naming it (filesystem for github
// work) rises, with its own part in the explanation.
func TestLearnsACoUsedServer(t *testing.T) {
	f := newFixture(t, learn.Config{}, nil)
	q := "create github issue about the crash"
	conf := func() (float64, string) {
		zero := float32(0)
		res, err := f.rt.Route(context.Background(), route.RouteQuery{Query: q, MinConfidence: &zero, Caller: "hub"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Servers {
			if s.ID == "filesystem" {
				return s.Confidence, s.Evidence
			}
		}
		return 0, ""
	}
	before, _ := conf()
	for _, text := range []string{"list open pull requests", "check github notifications", "create github issue for the release",
		"comment on the github pull request", "close the github issue"} {
		f.report(t, "hub", text, "github", "filesystem")
	}
	after, ev := conf()
	if after <= before+0.2 {
		t.Errorf("filesystem confidence %.3f -> %.3f, want a rise of more than 0.2", before, after)
	}
	if !strings.Contains(ev, "learned: called") {
		t.Errorf("evidence %q has no learned part", ev)
	}
	in := f.view.Info()
	if in.Reports != 5 || in.Servers != 2 || in.Identities != 1 {
		t.Errorf("info %+v, want 5 reports of 2 servers by 1 identity", in)
	}
}

func TestReportRules(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, learn.Config{Rate: 1e-9, Burst: 4}, nil)
	vec, described := f.describe(t, "check github notifications")
	id := f.view.Observe("hub", vec, described)
	many := make([]string, learn.MaxNames+1)
	for i := range many {
		many[i] = "github"
	}
	tests := []struct {
		name        string
		use         learn.Use
		err         error
		stored      bool
		ignoredSrv  []string
		ignoredTool int
	}{
		{"by id", learn.Use{RequestID: id, Identity: "hub", Servers: []string{"github", "nope"}}, nil, true, []string{"nope"}, 0},
		{"same id again replaces", learn.Use{RequestID: id, Identity: "hub", Tools: []learn.ToolRef{{Server: "github", Name: "create_issue"}, {Server: "github", Name: "nope"}}}, nil, true, nil, 1},
		{"every name unknown", learn.Use{RequestID: id, Identity: "hub", Servers: []string{"nope"}}, nil, false, []string{"nope"}, 0},
		{"another identity's id", learn.Use{RequestID: id, Identity: "other", Servers: []string{"github"}}, learn.ErrUnknownRequest, false, nil, 0},
		{"unknown id", learn.Use{RequestID: "rq-none", Identity: "other2", Servers: []string{"github"}}, learn.ErrUnknownRequest, false, nil, 0},
		{"id and vector", learn.Use{RequestID: id, Vec: vec, Identity: "third"}, learn.ErrBadReport, false, nil, 0},
		{"too many names", learn.Use{Vec: vec, Identity: "fourth", Servers: many}, learn.ErrBadReport, false, nil, 0},
		{"empty name", learn.Use{Vec: vec, Identity: "fourth", Servers: []string{""}}, learn.ErrBadReport, false, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := f.view.Report(ctx, tc.use)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if res.Stored != tc.stored || !reflect.DeepEqual(res.IgnoredServers, tc.ignoredSrv) || len(res.IgnoredTools) != tc.ignoredTool {
				t.Errorf("got %+v, want stored %v, ignored servers %v, %d ignored tools", res, tc.stored, tc.ignoredSrv, tc.ignoredTool)
			}
		})
	}
	recs := f.l.Export("hub")
	if len(recs) != 1 || !reflect.DeepEqual(recs[0].Servers, []string{"github"}) || len(recs[0].Tools) != 1 {
		t.Errorf("hub's records %+v, want the second report of its one request", recs)
	}
	// Reset forgets them, and the requests waiting.
	if n, err := f.l.Reset(ctx, "hub"); err != nil || n != 1 {
		t.Errorf("reset: %d, %v; want 1 record deleted", n, err)
	}
	if _, err := f.view.Report(ctx, learn.Use{RequestID: id, Identity: "hub", Servers: []string{"github"}}); !errors.Is(err, learn.ErrUnknownRequest) {
		t.Errorf("report on a reset request: %v, want ErrUnknownRequest", err)
	}
	// The burst of 4 is spent: the next report is refused.
	if _, err := f.view.Report(ctx, learn.Use{Vec: vec, Identity: "hub", Servers: []string{"github"}}); !errors.Is(err, learn.ErrRateLimited) {
		t.Errorf("fifth report in a burst of 4: err %v, want ErrRateLimited", err)
	}
}

// A hostile identity's reports move another caller's confidences by at
// most their weight, max(ForeignFloor, ForeignRatio × own) against the
// caller's own reports: a fifth for a caller with 40, however many the
// hostile one makes. Sharing every report alike has no such bound.
func TestHostileIdentityBounded(t *testing.T) {
	moved := func(cfg learn.Config) float64 {
		f := newFixture(t, cfg, nil)
		for i := 0; i < 40; i++ {
			f.report(t, "hub", queries[i%3], "github")
		}
		clean := answers(t, f.rt, "hub")
		for i := 0; i < 1000; i++ {
			f.report(t, "hostile", queries[i%len(queries)], "jira")
		}
		dirty := answers(t, f.rt, "hub")
		worst := 0.0
		for i := range clean {
			for _, s := range clean[i].Servers {
				for _, d := range dirty[i].Servers {
					if d.ID == s.ID {
						worst = max(worst, math.Abs(d.Confidence-s.Confidence))
					}
				}
			}
		}
		if shared := answers(t, f.rt, "hostile"); reflect.DeepEqual(shared, dirty) {
			t.Errorf("the hostile identity's own answers ignore its reports")
		}
		return worst
	}
	if worst := moved(learn.Config{Rate: 1e9, Burst: 1 << 30}); worst > 0.2+1e-9 {
		t.Errorf("a hostile identity moved a confidence by %.3f, more than the bound 0.2", worst)
	}
	if worst := moved(learn.Config{Rate: 1e9, Burst: 1 << 30, Share: true}); worst <= 0.2 {
		t.Errorf("shared, the hostile identity moved a confidence by %.3f only: the test cannot tell", worst)
	}
}

// Reports persist in SQLite, whose files are 0600, across a new learner.
func TestSQLitePersists(t *testing.T) {
	path := t.TempDir() + "/sub/learn.db"
	st, err := learn.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, learn.Config{}, st)
	res := f.report(t, "hub", "check github notifications", "github", "filesystem")
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %o, want 600", p, fi.Mode().Perm())
		}
	}
	st2, err := learn.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := learn.New(context.Background(), learn.Config{}, st2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	recs := l2.Export("")
	if len(recs) != 1 || recs[0].ID != res.ID || !reflect.DeepEqual(recs[0].Servers, []string{"filesystem", "github"}) ||
		time.Since(recs[0].At) > time.Minute || len(recs[0].Vec) != dims {
		t.Fatalf("reloaded %+v, want the one report", recs)
	}
	if n, err := l2.Reset(context.Background(), ""); err != nil || n != 1 {
		t.Fatalf("reset %d, %v", n, err)
	}
	l3, err := learn.New(context.Background(), learn.Config{}, st2)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l3.Export("")); n != 0 {
		t.Errorf("%d reports after a reset, want 0", n)
	}
}

// A changed tool (another content hash) starts again: its old uses do
// not count for it.
func TestToolHashChanges(t *testing.T) {
	f := newFixture(t, learn.Config{}, nil)
	li, _ := f.idx.Lookup(index.KindTool, "github/create_issue")
	lb := f.idx.Labels[li]
	before := learn.ToolHash(&lb)
	lb.Description += " (v2)"
	if learn.ToolHash(&lb) == before {
		t.Fatal("a changed description keeps its hash")
	}
}

// A report knows the descriptions' probability of the servers it lists
// (Record.Described) and of those it called; of any other server only
// that it is below the least listed. Such a server keeps its
// descriptions' evidence exactly, however many reports are made about
// others, while a server the reports called without listing it (a
// utility the descriptions miss) still rises. With the least listed
// probability taken as every unlisted server's, each server nobody
// called yet was fitted a negative offset (MSC-Bench's fall at 600
// tasks, docs/learning.md).
func TestUnlistedServerKeepsItsEvidence(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	texts := []string{"list open pull requests", "check github notifications", "create github issue for the release",
		"comment on the github pull request", "close the github issue", "review the github pull request"}
	for i := 0; i < 30; i++ {
		vec, _ := f.describe(t, texts[i%len(texts)])
		// The descriptions listed github and jira; the agent called
		// github, and filesystem in every third task.
		called := []string{"github"}
		if i%3 == 0 {
			called = append(called, "filesystem")
		}
		if _, err := f.view.Report(ctx, learn.Use{Vec: vec, Identity: "hub", Servers: called,
			Described: []learn.Prob{{Server: "github", P: 0.3}, {Server: "jira", P: 0.2}}}); err != nil {
			t.Fatal(err)
		}
	}
	if fit := f.view.Fitted("hub"); fit.Tau == 0 {
		t.Fatalf("fitted tau 0: the reports say nothing, the test cannot tell")
	}
	// Offsets lists the servers the reports count for, most lowered first.
	var got []string
	for _, o := range f.view.Offsets("hub") {
		got = append(got, o.Server)
	}
	if want := []string{"jira", "filesystem", "github"}; !reflect.DeepEqual(got, want) {
		t.Errorf("offsets of %v, want %v (meta was never listed or called)", got, want)
	}
	label := func(id string) int {
		li, ok := f.idx.Lookup(index.KindServer, id)
		if !ok {
			t.Fatalf("no server %s", id)
		}
		return li
	}
	gh, jira, meta, fs := label("github"), label("jira"), label("meta"), label("filesystem")
	for _, text := range []string{"what can you do", "read file config json", "check github notifications"} {
		vec, _ := f.describe(t, text)
		r := f.view.Request("hub", vec, []int{meta, gh}, []float64{0.4, 0.3})
		if r == nil {
			t.Fatal("no learned evidence after 30 reports")
		}
		for _, pd := range []float64{0.01, 0.2, 0.6} {
			if e := r.Server(meta, pd); math.Abs(e.P-pd) > 1e-12 || e.Offset != 0 {
				t.Errorf("%q: meta, never listed or called: P %.6f offset %.3f, want its descriptions' %.6f and no offset (%s)", text, e.P, e.Offset, pd, e.Text)
			}
		}
		if e := r.Server(jira, 0.2); e.Offset >= 0 {
			t.Errorf("%q: jira, listed in 30 reports and never called: offset %.3f, want it lowered", text, e.Offset)
		}
		if e := r.Server(fs, 0.05); e.Offset <= 0 || e.P <= 0.05 {
			t.Errorf("%q: filesystem, called in 10 of 30 reports that never listed it: offset %.3f, P %.3f, want it raised", text, e.Offset, e.P)
		}
	}
}

// At the key's bound the identity holding the most gives up its oldest
// report, in the model and in the SQLite store a new learner reloads:
// other identities at their own bound do not push out alice's few reports
// (the tenth hostile pass: 50 identities' 20,500 reports through the
// daemon left alice none of her 40; tools/hostile/learnevict10b.py). Before,
// the oldest went whoever made them: alice's first.
func TestKeyBoundTakesFromTheBusiest(t *testing.T) {
	path := t.TempDir() + "/learn.db"
	st, err := learn.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := learn.Config{Rate: 1e9, Burst: 1 << 30, MaxReports: 10, MaxPerIdentity: 4}
	f := newFixture(t, cfg, st)
	for i := 0; i < 2; i++ {
		f.report(t, "token:alice", queries[i], "github")
	}
	for _, who := range []string{"token:b1", "token:b2", "token:b3"} {
		for i := 0; i < 6; i++ {
			f.report(t, who, queries[(i+1)%len(queries)], "jira")
		}
	}
	check := func(l *learn.Learner, what string) {
		n, total, most := map[string]int{}, 0, 0
		for _, r := range l.Export("") {
			n[r.Identity]++
			total++
			if r.Identity != "token:alice" {
				most = max(most, n[r.Identity])
			}
		}
		if n["token:alice"] != 2 || total != 10 || most > 3 {
			t.Errorf("%s %v: want alice's 2 kept, 10 in all, the others sharing the rest (at most 3 each)", what, n)
		}
	}
	check(f.l, "kept")
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := learn.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := learn.New(context.Background(), cfg, st2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	check(l2, "reloaded")
}
