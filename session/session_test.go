package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// bg is the context of calls that the test does not cancel.
var bg = context.Background()

var cats = []string{"github", "filesystem", "jira", "meta"}

func newStore(t *testing.T, mut func(*Config)) (*Store, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{AllCategories: cats, MinimalCategories: []string{"meta", "filesystem"}, Now: clk.now}
	if mut != nil {
		mut(&cfg)
	}
	s, err := NewStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

func TestCreateExposures(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s store) {
		cases := []struct {
			exp  Exposure
			want []string
		}{
			{"", []string{"meta"}},
			{ExposeZero, []string{}},
			{ExposeMetaOnly, []string{"meta"}},
			{ExposeMinimal, []string{"filesystem", "meta"}},
			{ExposeAll, []string{"filesystem", "github", "jira", "meta"}},
		}
		for i, tc := range cases {
			t.Run(string(tc.exp), func(t *testing.T) {
				sn, err := s.Create(bg, fmt.Sprint("s", i), tc.exp)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(sn.Exposed, tc.want) {
					t.Fatalf("got %v, want %v", sn.Exposed, tc.want)
				}
				if len(sn.History) != 1 || sn.History[0].Operation != "create" {
					t.Fatalf("history %+v", sn.History)
				}
			})
		}
		if _, err := s.Create(bg, "x", "everything"); !errors.Is(err, ErrBadExposure) {
			t.Fatalf("bad exposure: %v", err)
		}
		if _, err := s.Create(bg, "s0", ""); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate: %v", err)
		}
		for _, id := range []string{"a b", "../x", "a/b", string(make([]byte, 200))} {
			if _, err := s.Create(bg, id, ""); !errors.Is(err, ErrBadID) {
				t.Fatalf("id %q: %v", id, err)
			}
		}
		sn, err := s.Create(bg, "", "")
		if err != nil || len(sn.ID) != 32 {
			t.Fatalf("generated id %q: %v", sn.ID, err)
		}
	})
}

func TestUpdateModes(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s store) {
		if _, err := s.Create(bg, "a", ExposeMetaOnly); err != nil {
			t.Fatal(err)
		}
		ch, sn, changed, err := s.Update(bg, "a", []string{"github", "meta", "github"}, "")
		if err != nil || !changed || !slices.Equal(ch.Added, []string{"github"}) || ch.Total != 2 || ch.Operation != "additive" {
			t.Fatalf("additive: %+v %v %v", ch, changed, err)
		}
		if !slices.Equal(sn.Exposed, []string{"github", "meta"}) {
			t.Fatalf("exposed %v", sn.Exposed)
		}
		_, _, changed, err = s.Update(bg, "a", []string{"github"}, ModeAdditive)
		if err != nil || changed {
			t.Fatalf("no-op reported changed=%v err=%v", changed, err)
		}
		ch, sn, changed, err = s.Update(bg, "a", []string{"jira"}, ModeReplacement)
		if err != nil || !changed || !slices.Equal(ch.Added, []string{"jira"}) || !slices.Equal(ch.Removed, []string{"github", "meta"}) {
			t.Fatalf("replacement: %+v %v", ch, err)
		}
		if len(sn.History) != 3 {
			t.Fatalf("history %d entries, want 3 (no-op not recorded)", len(sn.History))
		}
		if _, _, _, err := s.Update(bg, "a", nil, "merge"); !errors.Is(err, ErrBadMode) {
			t.Fatalf("bad mode: %v", err)
		}
		if _, _, _, err := s.Update(bg, "nope", nil, ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown session: %v", err)
		}
	})
}

func TestWatchIsolationAndNoOps(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s store) {
		for _, id := range []string{"a", "b"} {
			if _, err := s.Create(bg, id, ExposeMetaOnly); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wa, err := s.Watch(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		wb, err := s.Watch(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		s.Update(bg, "a", []string{"github"}, "")
		s.Update(bg, "a", []string{"github"}, "") // no-op
		s.Update(bg, "a", []string{"jira"}, "")
		for _, want := range [][]string{{"github"}, {"jira"}} {
			select {
			case ev := <-wa:
				if ev.SessionID != "a" || !slices.Equal(ev.Change.Added, want) {
					t.Fatalf("event %+v, want added %v", ev, want)
				}
			case <-time.After(time.Second):
				t.Fatal("no event")
			}
		}
		select {
		case ev := <-wa:
			t.Fatalf("extra event for a no-op: %+v", ev)
		case ev := <-wb:
			t.Fatalf("session b saw a's change: %+v", ev)
		default:
		}
		if got, _ := s.Exposed(bg, "b"); !slices.Equal(got, []string{"meta"}) {
			t.Fatalf("b exposed %v", got)
		}
		cancel()
		if _, ok := <-wa; ok {
			t.Fatal("watch channel not closed after cancel")
		}
	})
}

func TestTTLAndLimit(t *testing.T) {
	s, clk := newStore(t, func(c *Config) { c.TTL = time.Minute; c.MaxSessions = 2 })
	s.Create(bg, "a", "")
	s.Create(bg, "b", "")
	w, _ := s.Watch(context.Background(), "a")
	if _, err := s.Create(bg, "c", ""); !errors.Is(err, ErrLimit) {
		t.Fatalf("limit: %v", err)
	}
	clk.add(30 * time.Second)
	if _, err := s.Get(bg, "b"); err != nil { // touch b
		t.Fatal(err)
	}
	clk.add(45 * time.Second)
	if n := s.Sweep(); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	if _, err := s.Get(bg, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired session: %v", err)
	}
	if _, ok := <-w; ok {
		t.Fatal("watcher of an expired session not closed")
	}
	if _, err := s.Create(bg, "c", ""); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// numbered returns the categories c0..c<n-1>.
func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("c", i)
	}
	return out
}

func TestHistoryBounded(t *testing.T) {
	forEachStore(t, func(c *Config) { c.HistoryLimit, c.AllCategories = 5, numbered(20) }, func(t *testing.T, s store) {
		s.Create(bg, "a", ExposeZero)
		for i := 0; i < 20; i++ {
			s.Update(bg, "a", []string{fmt.Sprint("c", i)}, ModeReplacement)
		}
		sn, _ := s.Get(bg, "a")
		if len(sn.History) != 5 {
			t.Fatalf("history %d, want 5", len(sn.History))
		}
	})
}

func TestSlowWatcherDropped(t *testing.T) {
	s, _ := newStore(t, func(c *Config) { c.WatchBuffer, c.AllCategories = 2, numbered(5) })
	s.Create(bg, "a", ExposeZero)
	w, _ := s.Watch(context.Background(), "a")
	for i := 0; i < 5; i++ {
		s.Update(bg, "a", []string{fmt.Sprint("c", i)}, ModeReplacement)
	}
	n := 0
	for range w {
		n++
	}
	if n != 2 {
		t.Fatalf("got %d buffered events before close, want 2", n)
	}
}

// TestConcurrent exercises 200 sessions at once under the race detector.
func TestConcurrent(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s store) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				id := fmt.Sprint("s", i)
				if _, err := s.Create(bg, id, ExposeZero); err != nil {
					errs <- err
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				w, err := s.Watch(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				for j := 0; j < 10; j++ {
					if _, _, _, err := s.Update(bg, id, []string{cats[j%len(cats)]}, ""); err != nil {
						errs <- err
						return
					}
					s.Get(bg, id)
				}
				got := 0
				for got < len(cats) {
					select {
					case ev := <-w:
						if ev.SessionID != id {
							errs <- fmt.Errorf("session %s got %s's event", id, ev.SessionID)
							return
						}
						got++
					case <-time.After(5 * time.Second):
						errs <- fmt.Errorf("session %s: %d events, want %d", id, got, len(cats))
						return
					}
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n, err := s.Len(bg); err != nil || n != 200 {
			t.Fatalf("%d sessions (%v)", n, err)
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	s, _ := NewStore(Config{AllCategories: cats})
	s.Create(bg, "a", ExposeZero)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Update(bg, "a", []string{cats[i%len(cats)]}, ModeReplacement)
	}
}

func BenchmarkExposed(b *testing.B) {
	s, _ := NewStore(Config{AllCategories: cats})
	s.Create(bg, "a", ExposeAll)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Exposed(bg, "a")
	}
}

func TestUpdateRejectsWhatUpdateCannotApply(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s store) {
		if _, err := s.Create(bg, "a", ExposeZero); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			cats []string
			mode string
			want error
		}{
			{"unknown mode", []string{"github"}, "merge", ErrBadMode},
			{"unknown category", []string{"github", "nope"}, "", ErrUnknownCategory},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, _, _, err := s.Update(bg, "a", tc.cats, tc.mode); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if got, _ := s.Exposed(bg, "a"); len(got) != 0 {
					t.Fatalf("exposed %v after a rejected update, want none", got)
				}
			})
		}
		for _, m := range []string{"", ModeAdditive, ModeReplacement} {
			if err := CheckMode(m); err != nil {
				t.Errorf("CheckMode(%q): got %v, want nil", m, err)
			}
		}
		long := strings.Repeat("é", 40) // 80 bytes: a 64-byte cut would split a rune
		if err := CheckMode(long); !errors.Is(err, ErrBadMode) || !utf8.ValidString(err.Error()) {
			t.Fatalf("CheckMode(long): got %q, want ErrBadMode as valid UTF-8", err)
		}
	})
}

func TestOwnerQuotaAndOwner(t *testing.T) {
	ctx := context.Background()
	forEachStore(t, func(c *Config) { c.MaxSessions, c.MaxPerOwner = 10, 2 }, func(t *testing.T, st store) {
		alice, bob := Owner{ID: "alice", Quota: "alice"}, Owner{ID: "bob", Quota: "bob"}
		a1, err := st.CreateFor(ctx, alice, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateFor(ctx, alice, "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateFor(ctx, alice, "", ""); !errors.Is(err, ErrOwnerLimit) {
			t.Fatalf("third session of alice: %v, want ErrOwnerLimit", err)
		}
		if _, err := st.CreateFor(ctx, bob, "", ""); err != nil {
			t.Fatalf("bob limited by alice: %v", err)
		}
		if got, err := st.Owner(ctx, a1.ID); err != nil || got != "alice" || a1.Owner != "alice" {
			t.Fatalf("Owner = %q %v (snapshot %q), want alice", got, err, a1.Owner)
		}
		if got, err := st.Get(ctx, a1.ID); err != nil || got.Owner != "alice" {
			t.Fatalf("Get: owner %q %v, want alice", got.Owner, err)
		}
		// Deleting gives the quota back.
		if err := st.Delete(ctx, a1.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateFor(ctx, alice, "", ""); err != nil {
			t.Fatalf("after delete: %v", err)
		}
		if _, err := st.Owner(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Owner of unknown: %v", err)
		}
	})
}

func TestOwnerQuotaExpires(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	st, err := NewStore(Config{MaxSessions: 10, MaxPerOwner: 1, AllCategories: []string{"meta"}, TTL: time.Minute,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	alice := Owner{ID: "alice", Quota: "alice"}
	if _, err := st.CreateFor(ctx, alice, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateFor(ctx, alice, "", ""); !errors.Is(err, ErrOwnerLimit) {
		t.Fatalf("second session: %v, want ErrOwnerLimit", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := st.CreateFor(ctx, alice, "", ""); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestScopedID: a session id is keyed per owner, as a valid id of fixed
// length, the same every time.
func TestScopedID(t *testing.T) {
	a, b := ScopedID("alice", "s1"), ScopedID("bob", "s1")
	if a == b || a != ScopedID("alice", "s1") {
		t.Fatalf("alice's s1 %q, bob's s1 %q: want distinct keys, each stable", a, b)
	}
	// The owner and id are not run together: ("a", "b.c") is not ("a.b", "c").
	if ScopedID("a", "b.c") == ScopedID("a.b", "c") {
		t.Fatal("owner and id run together")
	}
	for _, k := range []string{a, b, ScopedID("cert:CN with spaces/and slashes", strings.Repeat("x", 128))} {
		if err := CheckID(k); err != nil || len(k) != 33 {
			t.Errorf("key %q: %v, len %d; want a valid id of 33 characters", k, err, len(k))
		}
	}
}

// At MaxSessions a caller holding fewer sessions than the busiest takes
// the place of the busiest's least recently used session, which ends as
// an expired one does (NOT_FOUND, its watch closed, counted); the busiest
// itself is refused. The tenth hostile pass: ten identities at their
// 1,000 filled --max-sessions 10,000 and bob, with none, was refused
// RESOURCE_EXHAUSTED for the whole TTL (tools/hostile/sessfill11.py).
func TestFullStoreTakesFromTheBusiest(t *testing.T) {
	clk := &clock{t: time.Now()}
	var displaced atomic.Int64
	mut := func(c *Config) {
		c.MaxSessions, c.MaxPerOwner, c.Now = 10, 4, clk.now
		c.Displaced = func() { displaced.Add(1) }
	}
	forEachStore(t, mut, func(t *testing.T, st store) {
		displaced.Store(0)
		who := func(q string) Owner { return Owner{ID: q, Quota: q} }
		ids := map[string][]string{}
		create := func(q string) error {
			clk.add(time.Second)
			sn, err := st.CreateFor(bg, who(q), "", "")
			if err == nil {
				ids[q] = append(ids[q], sn.ID)
			}
			return err
		}
		for _, q := range []string{"b1", "b1", "b1", "b1", "b2", "b2", "b2", "b3", "b3", "b3"} {
			if err := create(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		// A watch of b1's second session (which touches it), then b1's
		// others are used again: the watched one is b1's least recently
		// used.
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		clk.add(time.Second)
		w, err := st.Watch(ctx, ids["b1"][1])
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 2, 3} {
			clk.add(time.Second)
			if _, err := st.Get(bg, ids["b1"][i]); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			who, gone string // caller; the session that makes way ("" for none)
			want      error
		}{
			{"bob", ids["b1"][1], nil}, // b1 holds 4, the most
			{"b1", "", ErrLimit},       // b1 holds 3 as b2 and b3 do
			{"bob", ids["b2"][0], nil}, // b1, b2, b3 at 3: b2's LRU is the oldest
			{"bob", ids["b3"][0], nil}, // bob 2; b1 and b3 at 3: b3's is older
			{"bob", "", ErrLimit},      // bob 3, as b1: as busy as the busiest
		}
		for i, s := range steps {
			err := create(s.who)
			if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
				t.Fatalf("step %d: %s creates: %v, want %v", i, s.who, err, s.want)
			}
			if s.gone != "" {
				if _, err := st.Get(bg, s.gone); !errors.Is(err, ErrNotFound) {
					t.Fatalf("step %d: the session that made way: %v, want ErrNotFound", i, err)
				}
			}
			if n, err := st.Len(bg); err != nil || n != 10 {
				t.Fatalf("step %d: Len %d (%v), want 10", i, n, err)
			}
		}
		select {
		case _, ok := <-w:
			if ok {
				t.Fatal("the watch of the session that made way got an event, want it closed")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the watch of the session that made way is still open")
		}
		for _, id := range []string{ids["b1"][0], ids["b1"][2], ids["b1"][3], ids["b2"][1], ids["b3"][1]} {
			if _, err := st.Get(bg, id); err != nil {
				t.Fatalf("a session that did not make way: %v", err)
			}
		}
		if got := displaced.Load(); got != 3 {
			t.Fatalf("Displaced called %d times, want 3", got)
		}
	})
}

// BenchmarkCreateAtLimit: a create when MaxSessions (10,000, held by ten
// owners) are held, each by a new owner, so each closes the busiest
// owner's least recently used session. It costs the same whatever the
// number held: the store walks neither its sessions nor its owners.
func BenchmarkCreateAtLimit(b *testing.B) {
	st, err := NewStore(Config{MaxSessions: 10000, MaxPerOwner: 1000, AllCategories: cats})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		q := fmt.Sprint("m", i%10)
		if _, err := st.CreateFor(bg, Owner{ID: q, Quota: q}, "", ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := fmt.Sprint("new", i)
		if _, err := st.CreateFor(bg, Owner{ID: q, Quota: q}, "", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFullStoreAgreesWithAWalk: random creates, uses and deletes by a few
// owners at a small MaxSessions; after each, the sessions the store holds
// are those of a model that finds the busiest owner's least recently used
// session by walking every session.
func TestFullStoreAgreesWithAWalk(t *testing.T) {
	for seed := range int64(20) {
		rng := rand.New(rand.NewSource(seed))
		s, clk := newStore(t, func(c *Config) { c.MaxSessions, c.MaxPerOwner = 12, 6 })
		type rec struct {
			owner string
			last  int
		}
		model := map[string]*rec{}
		step := 0
		for range 400 {
			step++
			clk.add(time.Millisecond)
			q := fmt.Sprint("o", rng.Intn(5))
			ids := slices.Sorted(maps.Keys(model))
			switch r := rng.Intn(10); {
			case r < 5: // create
				held := map[string]int{}
				for _, m := range model {
					held[m.owner]++
				}
				want := error(nil)
				victim := ""
				if len(model) >= 12 {
					most := 0
					for _, n := range held {
						most = max(most, n)
					}
					if held[q] >= most {
						want = ErrLimit
					} else {
						for id, m := range model {
							if held[m.owner] == most && (victim == "" || m.last < model[victim].last) {
								victim = id
							}
						}
					}
				}
				if want == nil && held[q] >= 6 && (victim == "" || model[victim].owner != q) {
					want = ErrOwnerLimit
				}
				sn, err := s.CreateFor(bg, Owner{ID: q, Quota: q}, "", "")
				if !errors.Is(err, want) || (want == nil && err != nil) {
					t.Fatalf("seed %d step %d: %s creates: %v, want %v", seed, step, q, err, want)
				}
				if err == nil {
					delete(model, victim)
					model[sn.ID] = &rec{owner: q, last: step}
				}
			case r < 8 && len(ids) > 0: // use
				id := ids[rng.Intn(len(ids))]
				if _, err := s.Get(bg, id); err != nil {
					t.Fatalf("seed %d step %d: Get: %v", seed, step, err)
				}
				model[id].last = step
			case len(ids) > 0: // delete
				id := ids[rng.Intn(len(ids))]
				if err := s.Delete(bg, id); err != nil {
					t.Fatalf("seed %d step %d: Delete: %v", seed, step, err)
				}
				delete(model, id)
			}
			if n, _ := s.Len(bg); n != len(model) {
				t.Fatalf("seed %d step %d: Len %d, model %d", seed, step, n, len(model))
			}
			for id, m := range model {
				if got, err := s.Owner(bg, id); err != nil || got != m.owner {
					t.Fatalf("seed %d step %d: %s: owner %q %v, want %q", seed, step, id, got, err, m.owner)
				}
			}
		}
	}
}
