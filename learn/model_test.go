package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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

// sortedGroups is othersGroups as it was (a sort of every identity by
// weight, and of the rest by name): the reference for TestOthersGroups.
func sortedGroups(m *model, mass []float64, caller string, n int) []others {
	name := make([]string, len(m.ids))
	for s, id := range m.ids {
		name[id] = s
	}
	var ids []int
	for id, ms := range mass {
		if ms > 0 && (caller == "" || name[id] != caller) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int) int {
		if mass[a] != mass[b] {
			if mass[a] > mass[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(name[a], name[b])
	})
	var out []others
	for k := 0; k < len(ids); k++ {
		if k < n-1 || k == len(ids)-1 {
			g := others{has: make([]bool, len(m.ids)), key: "\x00without\x00" + name[ids[k]]}
			g.has[ids[k]] = true
			out = append(out, g)
			continue
		}
		// The rest, together: named by a hash of its members.
		rest := ids[k:]
		slices.SortFunc(rest, func(a, b int) int { return strings.Compare(name[a], name[b]) })
		h := sha256.New()
		g := others{has: make([]bool, len(m.ids))}
		for _, id := range rest {
			g.has[id] = true
			h.Write([]byte(name[id] + "\x00"))
		}
		g.key = "\x00without-all\x00" + hex.EncodeToString(h.Sum(nil)[:12])
		out = append(out, g)
		break
	}
	return out
}

// othersGroups finds the groups a sort of every identity would: the n−1
// weighing most alone (ties by name), the rest together under a hash of
// their names, for few identities and many, with ties, without a
// caller and with one among them, and identities weighing nothing.
func TestOthersGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, ids := range []int{0, 1, 2, 3, 4, 5, 7, 50, 300} {
		m := newModel("k")
		for i := range ids {
			m.put(Record{ID: fmt.Sprint(i), Key: "k", Identity: fmt.Sprintf("token:x%d", r.IntN(1000)*1000+i), At: time.Now(), Vec: []int8{1, 2}}, Config{}.WithDefaults())
		}
		for trial := range 20 {
			mass := make([]float64, len(m.ids))
			for id := range mass {
				switch r.IntN(4) {
				case 0:
					mass[id] = 200 // at the cap: ties
				case 1:
					mass[id] = 0
				default:
					mass[id] = float64(r.IntN(5)) + 0.5
				}
			}
			callers := []string{"", "token:nobody"}
			if ids > 0 {
				callers = append(callers, m.idName[trial%ids])
			}
			for _, caller := range callers {
				got, want := m.othersGroups(mass, caller, 4), sortedGroups(m, mass, caller, 4)
				if len(got) != len(want) {
					t.Fatalf("%d identities, caller %q: %d groups, want %d", ids, caller, len(got), len(want))
				}
				for g := range got {
					if got[g].key != want[g].key || !slices.Equal(got[g].has, want[g].has) {
						t.Errorf("%d identities, caller %q, group %d: %q %v, want %q %v", ids, caller, g, got[g].key, got[g].has, want[g].key, want[g].has)
					}
				}
			}
		}
	}
}
