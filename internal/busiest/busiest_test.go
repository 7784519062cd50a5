package busiest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestVictim(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	o := New[string]()
	items := map[string]*Item[string]{}
	for i, s := range [][2]string{{"carol", "c0"}, {"carol", "c1"}, {"alice", "a0"}, {"alice", "a1"}, {"alice", "a2"}} {
		items[s[1]] = o.Add(s[0], s[1], at(i))
	}
	o.Touch(items["a0"], at(10)) // alice's least recently used is a1 now
	for _, tc := range []struct {
		who, want string // "" for none
	}{
		{"bob", "a1"},   // alice holds 3, the most
		{"alice", ""},   // the busiest
		{"carol", "a1"}, // 2 < 3
	} {
		got := ""
		if v := o.Victim(tc.who); v != nil {
			got = v.Value
		}
		if got != tc.want {
			t.Fatalf("Victim(%s) = %q, want %q", tc.who, got, tc.want)
		}
	}
	o.Remove(items["a1"])
	o.Remove(items["a1"]) // again: nothing
	// alice and carol at 2: carol's c0 (at 0) is older than alice's a2 (at 4).
	if v := o.Victim("bob"); v == nil || v.Value != "c0" || v.Owner() != "carol" {
		t.Fatalf("Victim(bob) = %v, want carol's c0", v)
	}
	if o.Len() != 4 || o.Held("alice") != 2 || o.Held("carol") != 2 {
		t.Fatalf("Len %d, alice %d, carol %d; want 4, 2, 2", o.Len(), o.Held("alice"), o.Held("carol"))
	}
	for _, it := range items {
		o.Remove(it)
	}
	if o.Len() != 0 || o.Busiest() != nil || len(o.owned) != 0 || len(o.byCount) != 0 || o.most != 0 {
		t.Fatalf("after every remove: Len %d, busiest %v, %d owners, %d counts, most %d", o.Len(), o.Busiest(), len(o.owned), len(o.byCount), o.most)
	}
}

// TestBusiestAgreesWithAWalk: random adds, touches and removes; Busiest
// is always what a walk of every item finds.
func TestBusiestAgreesWithAWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	o := New[int]()
	var live []*Item[int]
	clock := 0
	for step := range 5000 {
		clock++
		now := time.Unix(int64(clock/3), 0) // ties happen
		switch r := rng.IntN(10); {
		case r < 4 || len(live) == 0:
			live = append(live, o.Add(fmt.Sprint("o", rng.IntN(6)), step, now))
		case r < 7:
			o.Touch(live[rng.IntN(len(live))], now)
		default:
			i := rng.IntN(len(live))
			o.Remove(live[i])
			live = append(live[:i], live[i+1:]...)
		}
		// The walk: the owner holding most; of those, the oldest least
		// recently used (then the lower key).
		held := map[string]int{}
		lru := map[string]*Item[int]{}
		for _, it := range live {
			k := it.Owner()
			held[k]++
			if l := lru[k]; l == nil || it.last.Before(l.last) || (it.last.Equal(l.last) && o.before(it, l)) {
				lru[k] = it
			}
		}
		var want *Item[int]
		for k, it := range lru {
			if want == nil || held[k] > held[want.Owner()] || (held[k] == held[want.Owner()] &&
				(it.last.Before(want.last) || (it.last.Equal(want.last) && k < want.Owner()))) {
				want = it
			}
		}
		if got := o.Busiest(); got != want || o.Len() != len(live) {
			t.Fatalf("step %d: Busiest %v, want %v (Len %d of %d)", step, got, want, o.Len(), len(live))
		}
	}
}

// before reports whether a comes before b in their owner's order of use.
func (s *Owners[V]) before(a, b *Item[V]) bool {
	for e := a.e; e != nil; e = e.Next() {
		if e == b.e {
			return true
		}
	}
	return false
}
