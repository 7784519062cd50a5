package session

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestPlaces(t *testing.T) {
	type step struct {
		op      string // take or give
		owner   string
		wantErr error
	}
	for _, tc := range []struct {
		name      string
		max, per  int
		steps     []step
		wantTotal int
		wantHeld  map[string]int
	}{
		{"an owner up to its share", 10, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"take", "alice", ErrOwnerLimit},
			{"take", "bob", nil},
		}, 3, map[string]int{"alice": 2, "bob": 1}},
		{"a place given back is taken again", 10, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"give", "alice", nil}, {"take", "alice", nil},
			{"take", "alice", ErrOwnerLimit},
		}, 2, map[string]int{"alice": 2}},
		{"every place taken", 3, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"take", "bob", nil}, {"take", "bob", ErrLimit},
			{"take", "carol", ErrLimit}, {"give", "alice", nil}, {"take", "carol", nil},
		}, 3, map[string]int{"alice": 1, "bob": 1, "carol": 1}},
		{"an owner's share is checked first", 2, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"take", "alice", ErrOwnerLimit},
		}, 2, map[string]int{"alice": 2}},
		{"a give without a take changes nothing", 3, 2, []step{
			{"give", "alice", nil}, {"take", "bob", nil}, {"give", "alice", nil},
		}, 1, map[string]int{"alice": 0, "bob": 1}},
		{"every place given back", 3, 3, []step{
			{"take", "", nil}, {"take", "", nil}, {"give", "", nil}, {"give", "", nil},
		}, 0, map[string]int{"": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewPlaces(tc.max, tc.per)
			for i, s := range tc.steps {
				if s.op == "give" {
					q.Give(s.owner)
					continue
				}
				if err := q.Take(s.owner); !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
					t.Fatalf("step %d: take(%q) = %v, want %v", i, s.owner, err, s.wantErr)
				}
			}
			for owner, want := range tc.wantHeld {
				total, held := q.Count(owner)
				if total != tc.wantTotal || held != want {
					t.Errorf("count(%q) = %d, %d, want %d, %d", owner, total, held, tc.wantTotal, want)
				}
			}
			if len(q.held) != countNonZero(tc.wantHeld) {
				t.Errorf("owners kept = %v, want only those holding places", q.held)
			}
		})
	}
}

func countNonZero(m map[string]int) int {
	n := 0
	for _, v := range m {
		if v > 0 {
			n++
		}
	}
	return n
}

func TestPlacesErrorSaysLimit(t *testing.T) {
	q := NewPlaces(5, 1)
	_ = q.Take("alice")
	if err := q.Take("alice"); err == nil || err.Error() != "session: too many sessions for this client (limit 1)" {
		t.Fatalf("got %v, want the owner limit with its number", err)
	}
}

// TestPlacesConcurrent has many goroutines of a few owners take and give
// places at once (run with -race): no owner ever holds more than its
// share nor all of them more than the total, and everything comes back.
func TestPlacesConcurrent(t *testing.T) {
	const (
		owners, perOwner, total = 4, 3, 10
		workers, rounds         = 32, 200
	)
	q := NewPlaces(total, perOwner)
	var held [owners]atomic.Int32
	var all, refused atomic.Int32
	var over atomic.Value // the first excess seen
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			o := w % owners
			owner := fmt.Sprint("owner-", o)
			for range rounds {
				if err := q.Take(owner); err != nil {
					if !errors.Is(err, ErrOwnerLimit) && !errors.Is(err, ErrLimit) {
						over.CompareAndSwap(nil, "unexpected error: "+err.Error())
					}
					refused.Add(1)
					continue
				}
				// Counted between a successful take and the give, these
				// never exceed what places allows.
				if n := held[o].Add(1); n > perOwner {
					over.CompareAndSwap(nil, fmt.Sprintf("%s holds %d > %d", owner, n, perOwner))
				}
				if n := all.Add(1); n > total {
					over.CompareAndSwap(nil, fmt.Sprintf("%d held in all > %d", n, total))
				}
				held[o].Add(-1)
				all.Add(-1)
				q.Give(owner)
			}
		})
	}
	wg.Wait()
	if v := over.Load(); v != nil {
		t.Fatal(v)
	}
	for o := range owners {
		if total, held := q.Count(fmt.Sprint("owner-", o)); total != 0 || held != 0 {
			t.Fatalf("after every give: total %d, owner-%d %d, want 0", total, o, held)
		}
	}
	if len(q.held) != 0 {
		t.Fatalf("owners kept after every give: %v", q.held)
	}
	if refused.Load() == 0 {
		t.Logf("no take was refused: the limits were not exercised this run")
	}
}
