package learn

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

// The count of records each identity holds, kept with every put and
// remove, is what a recount finds after puts past both bounds, a report
// replacing another by id, a reset of one identity and expiry.
func TestHeldMatchesRecount(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cfg := Config{MaxReports: 60, MaxPerIdentity: 25, MaxAge: time.Hour}
	m := newModel("k")
	check := func(what string) {
		t.Helper()
		want := map[int]int{}
		for _, x := range m.recs {
			want[x.identity]++
		}
		if !maps.Equal(m.held, want) {
			t.Fatalf("%s: held %v, recount %v", what, m.held, want)
		}
	}
	now := time.Now()
	for i := 0; i < 500; i++ {
		who := fmt.Sprint("token:m", r.IntN(6))
		id := fmt.Sprint("r", r.IntN(400)) // some ids come again: a replacement
		at := now.Add(-time.Duration(r.IntN(90)) * time.Minute)
		m.put(Record{ID: id, Key: "k", Identity: who, At: at, Vec: []int8{1, 2, 3}, Servers: []string{"s"}}, cfg)
		check(fmt.Sprint("put ", i))
		if i%97 == 0 {
			m.remove(func(x *rec) bool { return x.r.Identity == who })
			check("reset " + who)
		}
	}
	if len(m.recs) == 0 || len(m.recs) > cfg.MaxReports {
		t.Fatalf("%d records kept, want 1..%d", len(m.recs), cfg.MaxReports)
	}
}

// BenchmarkReload puts a key's 20,000 reports of 50 identities into a
// model, as a Learner does at start: linear since the counts are kept.
// Alternating old and new in one run (load average 10, two cores):
// 1.7-2.4 s before, 0.15-0.29 s after.
func BenchmarkReload(b *testing.B) {
	recs := make([]Record, 20000)
	now := time.Now().Add(-time.Hour)
	for i := range recs {
		vec := make([]int8, 384)
		for j := range vec {
			vec[j] = int8(i*7 + j)
		}
		recs[i] = Record{ID: fmt.Sprint("r", i), Key: "k", Identity: fmt.Sprint("token:m", i%50),
			At: now.Add(time.Duration(i) * time.Millisecond), Vec: vec, Servers: []string{"github"},
			Described: []Prob{{Server: "github", P: 0.4}, {Server: "jira", P: 0.2}}}
	}
	for b.Loop() {
		m := newModel("k")
		for _, r := range recs {
			m.put(r, Config{MaxReports: 20000, MaxPerIdentity: 5000, MaxAge: 24 * time.Hour})
		}
	}
}
