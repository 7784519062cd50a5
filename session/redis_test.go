package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/internal/testredis"
)

// store is what the server uses of a session store, and what the tests
// run against both stores check.
type store interface {
	Create(ctx context.Context, id string, exposure Exposure) (Snapshot, error)
	CreateFor(ctx context.Context, owner Owner, id string, exposure Exposure) (Snapshot, error)
	Owner(ctx context.Context, id string) (string, error)
	Get(ctx context.Context, id string) (Snapshot, error)
	Exposed(ctx context.Context, id string) ([]string, error)
	Delete(ctx context.Context, id string) error
	Update(ctx context.Context, id string, categories []string, mode string) (Change, Snapshot, bool, error)
	Watch(ctx context.Context, id string) (<-chan Event, error)
	Len(ctx context.Context) (int, error)
	Close() error
}

// forEachStore runs f against the in-memory store and a RedisStore on a
// real redis-server, so both keep the same contract.
func forEachStore(t *testing.T, mut func(*Config), f func(t *testing.T, s store)) {
	t.Run("memory", func(t *testing.T) {
		s, _ := newStore(t, mut)
		f(t, s)
	})
	t.Run("redis", func(t *testing.T) {
		srv := testredis.Start(t)
		f(t, newRedisStore(t, srv, mut))
	})
}

// testConfig is the configuration the tests start from.
func testConfig(mut func(*Config)) Config {
	cfg := Config{AllCategories: cats, MinimalCategories: []string{"meta", "filesystem"}}
	if mut != nil {
		mut(&cfg)
	}
	return cfg
}

// newRedisStore opens a RedisStore on srv, as one daemon would; several
// on the same server share their sessions.
func newRedisStore(t testing.TB, srv *testredis.Server, mut func(*Config)) *RedisStore {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewRedisStore(ctx, rdb, "", testConfig(mut))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// next returns the next event of w, failing after 5s.
func next(t *testing.T, w <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-w:
		if !ok {
			t.Fatal("watch closed, want an event")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event in 5s")
	}
	return Event{}
}

// TestRedisSharedAcrossDaemons checks two stores on one Redis (two
// daemons): a session made on one is read and changed on the other, and a
// watch on either sees every change exactly once, in order.
func TestRedisSharedAcrossDaemons(t *testing.T) {
	srv := testredis.Start(t)
	a, b := newRedisStore(t, srv, nil), newRedisStore(t, srv, nil)
	if _, err := a.Create(bg, "s1", ExposeMetaOnly); err != nil {
		t.Fatal(err)
	}
	sn, err := b.Get(bg, "s1")
	if err != nil || !slices.Equal(sn.Exposed, []string{"meta"}) || len(sn.History) != 1 {
		t.Fatalf("b.Get: %+v %v", sn, err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	wa, err := a.Watch(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.Watch(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		on    *RedisStore
		cats  []string
		mode  string
		added []string
	}{
		{a, []string{"github"}, "", []string{"github"}},
		{b, []string{"github"}, "", nil}, // no-op: no event
		{b, []string{"jira"}, ModeReplacement, []string{"jira"}},
		{a, []string{"filesystem"}, "", []string{"filesystem"}},
	}
	var want []Event
	for _, st := range steps {
		ch, _, changed, err := st.on.Update(bg, "s1", st.cats, st.mode)
		if err != nil {
			t.Fatal(err)
		}
		if changed != (st.added != nil) || !slices.Equal(ch.Added, st.added) {
			t.Fatalf("update %v: changed=%v added=%v, want added %v", st.cats, changed, ch.Added, st.added)
		}
		if changed {
			want = append(want, Event{SessionID: "s1", Change: ch})
		}
	}
	// A marker on another session: once it arrives, every event of s1
	// before it has been delivered too (one feed, in publish order).
	if _, err := a.Create(bg, "marker", ExposeZero); err != nil {
		t.Fatal(err)
	}
	wm, err := b.Watch(ctx, "marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.Update(bg, "marker", []string{"meta"}, ""); err != nil {
		t.Fatal(err)
	}
	next(t, wm)
	for name, w := range map[string]<-chan Event{"a": wa, "b": wb} {
		for i, we := range want {
			ev := next(t, w)
			if ev.SessionID != "s1" || !slices.Equal(ev.Change.Added, we.Change.Added) ||
				!slices.Equal(ev.Change.Removed, we.Change.Removed) || !ev.Change.Time.Equal(we.Change.Time) {
				t.Fatalf("watch on %s, event %d: got %+v, want %+v", name, i, ev, we)
			}
		}
		select {
		case ev := <-w:
			t.Fatalf("watch on %s: extra event %+v", name, ev)
		default:
		}
	}
	got, err := a.Exposed(bg, "s1")
	if err != nil || !slices.Equal(got, []string{"filesystem", "jira"}) {
		t.Fatalf("a.Exposed: %v %v", got, err)
	}
	if err := b.Delete(bg, "s1"); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]<-chan Event{"a": wa, "b": wb} {
		select {
		case _, ok := <-w:
			if ok {
				t.Fatalf("watch on %s: event after delete", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watch on %s not closed after the session was deleted on b", name)
		}
	}
	if _, err := a.Get(bg, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a.Get after delete on b: %v", err)
	}
}

// TestRedisConcurrentUpdatesAcrossDaemons races updates of one session
// from two stores: none is lost, and each watcher sees every change once,
// in the order of the session's history.
func TestRedisConcurrentUpdatesAcrossDaemons(t *testing.T) {
	srv := testredis.Start(t)
	all := numbered(40)
	mut := func(c *Config) { c.AllCategories, c.WatchBuffer, c.HistoryLimit = all, 64, 100 }
	a, b := newRedisStore(t, srv, mut), newRedisStore(t, srv, mut)
	if _, err := a.Create(bg, "s", ExposeZero); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	wa, _ := a.Watch(ctx, "s")
	wb, _ := b.Watch(ctx, "s")
	var wg sync.WaitGroup
	errs := make(chan error, len(all))
	for i, c := range all {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, changed, err := st.Update(bg, "s", []string{c}, ""); err != nil || !changed {
				errs <- fmt.Errorf("add %s: changed=%v err=%v", c, changed, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sn, err := a.Get(bg, "s")
	if err != nil || len(sn.Exposed) != len(all) || len(sn.History) != len(all)+1 {
		t.Fatalf("after %d concurrent adds: %d exposed, %d history entries (%v)", len(all), len(sn.Exposed), len(sn.History), err)
	}
	for name, w := range map[string]<-chan Event{"a": wa, "b": wb} {
		for i, h := range sn.History[1:] {
			ev := next(t, w)
			if !slices.Equal(ev.Change.Added, h.Added) || ev.Change.Total != i+1 {
				t.Fatalf("watch on %s, event %d: got %+v, want %+v", name, i, ev.Change, h)
			}
		}
	}
}

// TestRedisLimitAndTTL checks MaxSessions across two daemons and expiry by
// Redis (real time: the TTL is one second).
func TestRedisLimitAndTTL(t *testing.T) {
	srv := testredis.Start(t)
	mut := func(c *Config) { c.MaxSessions, c.TTL = 2, time.Second }
	a, b := newRedisStore(t, srv, mut), newRedisStore(t, srv, mut)
	if _, err := a.Create(bg, "x", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(bg, "x", ""); !errors.Is(err, ErrExists) {
		t.Fatalf("same id on b: %v", err)
	}
	if _, err := b.Create(bg, "y", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(bg, "z", ""); !errors.Is(err, ErrLimit) {
		t.Fatalf("third session across two daemons: %v, want ErrLimit", err)
	}
	if n, err := b.Len(bg); err != nil || n != 2 {
		t.Fatalf("Len %d (%v), want 2", n, err)
	}
	w, err := b.Watch(bg, "x")
	if err != nil {
		t.Fatal(err)
	}
	// Keep y active past x's expiry.
	for range 3 {
		time.Sleep(500 * time.Millisecond)
		if _, err := a.Get(bg, "y"); err != nil {
			t.Fatalf("active session y: %v", err)
		}
	}
	if _, err := a.Get(bg, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("idle session x after 1.5s with a 1s TTL: %v", err)
	}
	if n, err := b.Sweep(bg); err != nil || n != 1 {
		t.Fatalf("Sweep ended %d watched sessions (%v), want 1", n, err)
	}
	if _, ok := <-w; ok {
		t.Fatal("watch of an expired session not closed")
	}
	if n, err := a.Len(bg); err != nil || n != 1 {
		t.Fatalf("Len %d (%v), want 1", n, err)
	}
	if _, err := a.Create(bg, "z", ""); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestRedisSlowWatcherDropped: a watcher that does not read is closed
// after WatchBuffer events, never blocking the feed for the others.
func TestRedisSlowWatcherDropped(t *testing.T) {
	srv := testredis.Start(t)
	s := newRedisStore(t, srv, func(c *Config) { c.WatchBuffer, c.AllCategories = 2, numbered(5) })
	for _, id := range []string{"a", "marker"} {
		if _, err := s.Create(bg, id, ExposeZero); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := s.Watch(bg, "a")
	wm, _ := s.Watch(bg, "marker")
	for i := range 5 {
		if _, _, _, err := s.Update(bg, "a", []string{fmt.Sprint("c", i)}, ModeReplacement); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := s.Update(bg, "marker", []string{"c0"}, ""); err != nil {
		t.Fatal(err)
	}
	next(t, wm) // every event of a has been handed out by now
	n := 0
	for range w {
		n++
	}
	if n != 2 {
		t.Fatalf("got %d buffered events before close, want 2", n)
	}
}

// TestRedisGoesAway kills redis-server mid-run: calls answer
// ErrUnavailable (never another error), watchers close, and everything
// works again once it is back, without restarting the store.
func TestRedisGoesAway(t *testing.T) {
	srv := testredis.Start(t)
	a := newRedisStore(t, srv, nil)
	if _, err := a.Create(bg, "s", ""); err != nil {
		t.Fatal(err)
	}
	w, err := a.Watch(bg, "s")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	checks := map[string]func() error{
		"Create":  func() error { _, err := a.Create(bg, "t", ""); return err },
		"Get":     func() error { _, err := a.Get(bg, "s"); return err },
		"Exposed": func() error { _, err := a.Exposed(bg, "s"); return err },
		"Update":  func() error { _, _, _, err := a.Update(bg, "s", []string{"github"}, ""); return err },
		"Delete":  func() error { return a.Delete(bg, "s") },
		"Len":     func() error { _, err := a.Len(bg); return err },
		"Watch":   func() error { _, err := a.Watch(bg, "s"); return err },
	}
	for name, f := range checks {
		if err := f(); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with Redis down: %v, want ErrUnavailable", name, err)
		}
	}
	select {
	case _, ok := <-w:
		if ok {
			t.Fatal("event while Redis is down")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch not closed 10s after Redis went away")
	}
	srv.Start() // empty: no persistence, like a Redis that lost its data
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := a.Create(bg, "s", "")
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Create after Redis is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The feed resubscribes by itself; a new watch then sees changes.
	var w2 <-chan Event
	for {
		w2, err = a.Watch(bg, "s")
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Watch after Redis is back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, _, err := a.Update(bg, "s", []string{"github"}, ""); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w2); !slices.Equal(ev.Change.Added, []string{"github"}) {
		t.Fatalf("event after recovery: %+v", ev)
	}
}

func TestRedisStoreClosed(t *testing.T) {
	srv := testredis.Start(t)
	s := newRedisStore(t, srv, nil)
	if _, err := s.Create(bg, "s", ""); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Watch(bg, "s")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-w; ok {
		t.Fatal("watch open after Close")
	}
	if _, err := s.Get(bg, "s"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	// The session outlives this daemon's store: another one reads it.
	if _, err := newRedisStore(t, srv, nil).Get(bg, "s"); err != nil {
		t.Fatalf("Get on another store: %v", err)
	}
}

// BenchmarkRedisStore measures one call through a RedisStore on a local
// redis-server (loopback TCP): a read that marks the session active, and
// an exposure change written and published.
func BenchmarkRedisStore(b *testing.B) {
	srv := testredis.Start(b)
	s := newRedisStore(b, srv, func(c *Config) { c.AllCategories = cats })
	if _, err := s.Create(bg, "a", ExposeAll); err != nil {
		b.Fatal(err)
	}
	b.Run("Exposed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Exposed(bg, "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Update", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, _, err := s.Update(bg, "a", []string{cats[i%len(cats)]}, ModeReplacement); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
