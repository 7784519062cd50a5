package terminal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/internal/testredis"
)

// quietAndBusy records quiet's 3 events first, then 6 events of each of
// k busy identities in 3 sessions each (past MaxPerOwner 5 each), oldest
// first, and prunes.
func quietAndBusy(t *testing.T, s store, quiet string, k, from int, base time.Time) {
	t.Helper()
	ctx := context.Background()
	if quiet != "" {
		for i := range 3 {
			e := rec(quiet, "Which environment?", "staging", true)
			e.Time = base.Add(time.Duration(i) * time.Millisecond)
			if _, _, err := s.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 6 {
		for m := range k {
			e := rec(OwnedSessionID(fmt.Sprint("m", m), fmt.Sprint("s", i%3)), "Continue? [y/N]", "y", true)
			e.Time = base.Add(time.Second + time.Duration(from+i*k+m)*time.Millisecond)
			if _, _, err := s.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
}

// busyCounts returns what each of the k busy identities holds.
func busyCounts(t *testing.T, s store, k int) []int {
	t.Helper()
	out := make([]int, k)
	for m := range k {
		for i := range 3 {
			n, err := s.Count(context.Background(), OwnedSessionID(fmt.Sprint("m", m), fmt.Sprint("s", i)))
			if err != nil {
				t.Fatal(err)
			}
			out[m] += n
		}
	}
	return out
}

// TestStoreBoundTakesFromTheBusiest: past MaxEvents the owner holding the
// most gives up its oldest, in every store, so twelve identities each
// within its own bound do not push out a quiet identity's few events,
// nor those of the sessions of no owner (one owner together). The tenth
// hostile pass (tools/hostile/termpool10b.py): with --terminal-max-events
// 500 (50 each), bob's 10 events, then 60 each of m0..m11: bob's history
// was emptied, the store pruning the oldest whoever made them.
func TestStoreBoundTakesFromTheBusiest(t *testing.T) {
	ctx := context.Background()
	const k, maxEvents = 12, 50
	for _, tc := range []struct{ name, quiet string }{
		{"an identity", OwnedSessionID("bob", "b1")},
		{"no owner", "anon-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, StoreConfig{MaxEvents: maxEvents, MaxPerOwner: 5}, func(t *testing.T, s store) {
				quietAndBusy(t, s, tc.quiet, k, 0, time.Now().Add(-time.Hour))
				if h, err := s.History(ctx, tc.quiet, 100); err != nil || len(h) != 3 {
					t.Errorf("the quiet one's history after %d identities' events: %d events (%v), want its 3", k, len(h), err)
				}
				if l, err := s.Learned(ctx, "Which environment?", tc.quiet); err != nil || len(l) != 1 || l[0].Successes != 3 {
					t.Errorf("the quiet one's learned answer: %+v %v, want staging 3 times", l, err)
				}
				if n, err := s.Count(ctx, ""); err != nil || n != maxEvents {
					t.Errorf("store holds %d events (%v), want %d", n, err, maxEvents)
				}
				// The busy ones share the rest: 47 among 12, 3 or 4 each.
				for m, n := range busyCounts(t, s, k) {
					if n < 3 || n > 4 {
						t.Errorf("m%d holds %d events, want 3 or 4 (the busiest give up theirs)", m, n)
					}
				}
			})
		})
	}
}

// TestStoreBoundTakesFromTheBusiestAfterReload: a SQLite store reopened
// keeps the quiet identity's events, and more writes by the busy ones
// still take from themselves.
func TestStoreBoundTakesFromTheBusiestAfterReload(t *testing.T) {
	ctx := context.Background()
	const k = 12
	path := filepath.Join(t.TempDir(), "e.db")
	cfg := StoreConfig{MaxEvents: 50, MaxPerOwner: 5}
	bob := OwnedSessionID("bob", "b1")
	base := time.Now().Add(-time.Hour)
	s, err := OpenStore(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	quietAndBusy(t, s, bob, k, 0, base)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		s, err := OpenStore(path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := s.History(ctx, bob, 100); err != nil || len(h) != 3 {
			t.Errorf("reopened (%d): bob's history %d events (%v), want 3", round, len(h), err)
		}
		quietAndBusy(t, s, "", k, round*1000, base)
		if h, err := s.History(ctx, bob, 100); err != nil || len(h) != 3 {
			t.Errorf("reopened (%d), after more busy writes: bob's history %d events (%v), want 3", round, len(h), err)
		}
		if n, err := s.Count(ctx, ""); err != nil || n != 50 {
			t.Errorf("reopened (%d): store holds %d events (%v), want 50", round, n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRecordAtBound is one Record in a store full at MaxEvents
// (100 identities, a tenth each at most), so that every write also
// deletes the busiest identity's oldest, by the store's size: the cost
// of a write should not grow with it (counts read by index, no scan).
func BenchmarkRecordAtBound(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1_000, 20_000} {
		for _, backend := range []string{"sqlite", "redis"} {
			b.Run(fmt.Sprintf("%s/events=%d", backend, size), func(b *testing.B) {
				cfg := StoreConfig{MaxEvents: size}
				var s store
				if backend == "sqlite" {
					ss, err := OpenStore(filepath.Join(b.TempDir(), "e.db"), cfg)
					if err != nil {
						b.Fatal(err)
					}
					s = ss
				} else {
					srv := testredis.Start(b)
					rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
					b.Cleanup(func() { rdb.Close() })
					rs, err := NewRedisStore(rdb, "", cfg)
					if err != nil {
						b.Fatal(err)
					}
					s = rs
				}
				defer s.Close()
				write := func(i int) {
					if _, _, err := s.Record(ctx, rec(OwnedSessionID(fmt.Sprint("id", i%100), fmt.Sprint("s", i%7)), "Continue? [y/N]", "y", true)); err != nil {
						b.Fatal(err)
					}
				}
				for i := range size {
					write(i)
				}
				b.ReportAllocs()
				i := size
				for b.Loop() {
					write(i)
					i++
				}
			})
		}
	}
}
