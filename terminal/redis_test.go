package terminal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/internal/testredis"
)

// store is what TerminalService uses of a store, plus what the tests read.
type store interface {
	Record(ctx context.Context, e Event) (Event, bool, error)
	Learned(ctx context.Context, prompt, session string) ([]Learned, error)
	History(ctx context.Context, session string, limit int) ([]Event, error)
	DeleteSession(ctx context.Context, session string) (int64, error)
	Count(ctx context.Context, session string) (int, error)
	Prune(ctx context.Context) error
	Close() error
}

// forEachStore runs f against the SQLite store and a RedisStore on a real
// redis-server, so both keep the same rules.
func forEachStore(t *testing.T, cfg StoreConfig, f func(t *testing.T, s store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := OpenStore(filepath.Join(t.TempDir(), "e.db"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(t, s)
	})
	t.Run("redis", func(t *testing.T) {
		_, rdb := startRedis(t)
		s, err := NewRedisStore(rdb, "", cfg)
		if err != nil {
			t.Fatal(err)
		}
		f(t, s)
	})
}

func startRedis(t *testing.T) (*testredis.Server, *redis.Client) {
	t.Helper()
	srv := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return srv, rdb
}

func rec(session, prompt, input string, success bool) Event {
	return Event{SessionID: session, PromptText: prompt, Input: input, Success: success, Source: "user_typed", PromptType: TypeText}
}

// TestStoreRules runs the rules both stores share: secrets stored
// redacted and never learned, learned answers per session unless shared,
// the per-session and overall bounds, and deletion forgetting what a
// session taught.
func TestStoreRules(t *testing.T) {
	ctx := context.Background()
	t.Run("secrets", func(t *testing.T) {
		forEachStore(t, StoreConfig{ShareLearned: true}, func(t *testing.T, s store) {
			for _, e := range []Event{rec("a", "Password:", "Pw-typed-1", true), rec("a", "Value:", "ghp_"+strings.Repeat("Zq9x", 9), true)} {
				got, learned, err := s.Record(ctx, e)
				if err != nil || learned || got.Input != Redacted {
					t.Fatalf("Record(%q): input %q learned=%v err=%v", e.PromptText, got.Input, learned, err)
				}
				l, err := s.Learned(ctx, e.PromptText, "a")
				if err != nil || len(l) != 0 {
					t.Fatalf("learned from a secret: %+v %v", l, err)
				}
			}
			h, err := s.History(ctx, "a", 10)
			if err != nil || len(h) != 2 || h[0].Input != Redacted || h[1].Input != Redacted {
				t.Fatalf("history %+v %v", h, err)
			}
		})
	})
	t.Run("learned is per session unless shared", func(t *testing.T) {
		for _, share := range []bool{false, true} {
			t.Run(fmt.Sprint("share=", share), func(t *testing.T) {
				forEachStore(t, StoreConfig{ShareLearned: share}, func(t *testing.T, s store) {
					for _, e := range []Event{rec("a", "Environment name:", "staging", true), rec("a", "Environment name:", "staging", true),
						rec("b", "Environment name:", "prod", true), rec("a", "Environment name:", "broken", false)} {
						if _, _, err := s.Record(ctx, e); err != nil {
							t.Fatal(err)
						}
					}
					l, err := s.Learned(ctx, "Environment  NAME:", "a")
					want := []Learned{{Input: "staging", Successes: 2, Total: 2}}
					if share {
						want = []Learned{{Input: "staging", Successes: 2, Total: 3}, {Input: "prod", Successes: 1, Total: 3}}
					}
					if err != nil || !slices.Equal(l, want) {
						t.Fatalf("Learned: %+v (%v), want %+v", l, err, want)
					}
					if n, err := s.DeleteSession(ctx, "a"); err != nil || n != 3 {
						t.Fatalf("DeleteSession: %d %v", n, err)
					}
					l, err = s.Learned(ctx, "Environment name:", "a")
					want = nil
					if share {
						want = []Learned{{Input: "prod", Successes: 1, Total: 1}}
					}
					if err != nil || !slices.Equal(l, want) {
						t.Fatalf("Learned after delete: %+v (%v), want %+v", l, err, want)
					}
				})
			})
		}
	})
	t.Run("shared learning stays with its owner", func(t *testing.T) {
		// The third hostile pass: with ShareLearned, alice's answers were
		// suggested to bob, and alice could teach bob's terminals.
		forEachStore(t, StoreConfig{ShareLearned: true}, func(t *testing.T, s store) {
			alice, bob := OwnedSessionID("alice", "s1"), OwnedSessionID("bob", "s1")
			for _, e := range []Event{rec(alice, "Deploy to which cluster?", "prod-eu-1", true), rec(alice, "Deploy to which cluster?", "prod-eu-1", true),
				rec(bob, "Deploy to which cluster?", "staging", true), rec("anon", "Deploy to which cluster?", "dev", true)} {
				if _, _, err := s.Record(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct {
				name, session string
				want          []Learned
			}{
				{"alice, another session", OwnedSessionID("alice", "s2"), []Learned{{Input: "prod-eu-1", Successes: 2, Total: 2}}},
				{"alice, no session", OwnedSessionID("alice", ""), []Learned{{Input: "prod-eu-1", Successes: 2, Total: 2}}},
				{"bob, alice's session id", OwnedSessionID("bob", "s1"), []Learned{{Input: "staging", Successes: 1, Total: 1}}},
				{"bob, no session", OwnedSessionID("bob", ""), []Learned{{Input: "staging", Successes: 1, Total: 1}}},
				{"carol", OwnedSessionID("carol", "s1"), nil},
				// An anonymous daemon's sessions have no owner: they share
				// among themselves, never an owner's answers.
				{"anonymous", "anon2", []Learned{{Input: "dev", Successes: 1, Total: 1}}},
			} {
				l, err := s.Learned(ctx, "Deploy to which cluster?", tc.session)
				if err != nil || !slices.Equal(l, tc.want) {
					t.Errorf("%s: Learned %+v (%v), want %+v", tc.name, l, err, tc.want)
				}
			}
			// Deleting alice's session takes its answers out of her share.
			if _, err := s.DeleteSession(ctx, alice); err != nil {
				t.Fatal(err)
			}
			if l, err := s.Learned(ctx, "Deploy to which cluster?", OwnedSessionID("alice", "")); err != nil || len(l) != 0 {
				t.Errorf("alice after delete: %+v %v, want none", l, err)
			}
		})
	})
	t.Run("one owner cannot push out another's events", func(t *testing.T) {
		// The third hostile pass: one identity recording in many
		// sessions deleted every other identity's history by MaxEvents.
		forEachStore(t, StoreConfig{MaxEvents: 12, MaxPerOwner: 4}, func(t *testing.T, s store) {
			base := time.Now().Add(-time.Hour)
			bob := OwnedSessionID("bob", "b1")
			for i := range 3 {
				e := rec(bob, "Deploy to which cluster?", "staging", true)
				e.Time = base.Add(time.Duration(i) * time.Millisecond)
				if _, _, err := s.Record(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 200 {
				e := rec(OwnedSessionID("alice", fmt.Sprint("s", i%8)), "$ ", fmt.Sprint("ls ", i), true)
				e.Time = base.Add(time.Second + time.Duration(i)*time.Millisecond)
				if _, _, err := s.Record(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Prune(ctx); err != nil {
				t.Fatal(err)
			}
			if h, err := s.History(ctx, bob, 100); err != nil || len(h) != 3 {
				t.Errorf("bob's history after alice's 200 events: %d events (%v), want 3", len(h), err)
			}
			if l, err := s.Learned(ctx, "Deploy to which cluster?", bob); err != nil || len(l) != 1 || l[0].Successes != 3 {
				t.Errorf("bob's learned answer after alice's events: %+v %v", l, err)
			}
			alice := 0
			for i := range 8 {
				n, err := s.Count(ctx, OwnedSessionID("alice", fmt.Sprint("s", i)))
				if err != nil {
					t.Fatal(err)
				}
				alice += n
			}
			if alice != 4 {
				t.Errorf("alice holds %d events, want her share of 4", alice)
			}
		})
	})
	t.Run("session bound", func(t *testing.T) {
		forEachStore(t, StoreConfig{MaxPerSession: 5}, func(t *testing.T, s store) {
			for i := range 40 {
				if _, _, err := s.Record(ctx, rec(fmt.Sprint("s", i%4), "Continue? [y/N]", "y", true)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 4 {
				if n, err := s.Count(ctx, fmt.Sprint("s", i)); err != nil || n != 5 {
					t.Fatalf("session s%d holds %d events (%v), want 5", i, n, err)
				}
			}
		})
	})
	t.Run("bounds", func(t *testing.T) {
		forEachStore(t, StoreConfig{MaxPerSession: 5, MaxEvents: 12}, func(t *testing.T, s store) {
			base := time.Now().Add(-time.Hour)
			for i := range 40 {
				e := rec(fmt.Sprint("s", i%4), "Continue? [y/N]", "y", true)
				e.Time = base.Add(time.Duration(i) * time.Millisecond)
				if _, _, err := s.Record(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			// The overall bound holds on every insert, not only at Prune:
			// the sessions of no owner are one owner, its oldest go first.
			for i := range 4 {
				if n, err := s.Count(ctx, fmt.Sprint("s", i)); err != nil || n != 3 {
					t.Fatalf("session s%d holds %d events (%v), want 3", i, n, err)
				}
			}
			if err := s.Prune(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := s.Count(ctx, ""); err != nil || n != 12 {
				t.Fatalf("store holds %d events (%v), want 12", n, err)
			}
			// What was pruned no longer counts as learned: 12 retained, 3 per session.
			l, err := s.Learned(ctx, "Continue? [y/N]", "s0")
			if err != nil || len(l) != 1 || l[0].Successes != 3 {
				t.Fatalf("learned after pruning: %+v %v", l, err)
			}
			h, err := s.History(ctx, "s3", 100)
			if err != nil || len(h) != 3 || !h[0].Time.Before(h[2].Time) {
				t.Fatalf("history after pruning: %+v %v", h, err)
			}
		})
	})
}

// TestRedisStoreShared: two daemons' stores on one Redis learn from the
// same events and see the same history.
func TestRedisStoreShared(t *testing.T) {
	ctx := context.Background()
	_, rdb := startRedis(t)
	a, _ := NewRedisStore(rdb, "", StoreConfig{})
	b, _ := NewRedisStore(rdb, "", StoreConfig{})
	e, _, err := a.Record(ctx, rec("x", "Environment name:", "staging", true))
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.History(ctx, "x", 10)
	if err != nil || len(h) != 1 || h[0].ID != e.ID || h[0].Input != "staging" || !h[0].Time.Equal(e.Time) {
		t.Fatalf("history on b: %+v %v", h, err)
	}
	if l, err := b.Learned(ctx, "Environment name:", "x"); err != nil || len(l) != 1 || l[0].Input != "staging" {
		t.Fatalf("learned on b: %+v %v", l, err)
	}
}

// TestRedisStoreNeverHoldsSecrets reads every key and value in Redis after
// secrets were recorded.
func TestRedisStoreNeverHoldsSecrets(t *testing.T) {
	ctx := context.Background()
	_, rdb := startRedis(t)
	s, _ := NewRedisStore(rdb, "", StoreConfig{ShareLearned: true})
	secrets := []string{"Pw-typed-1", "ghp_" + strings.Repeat("Zq9x", 9), "Pw-echo-off-2"}
	events := []Event{rec("a", "Password for 'https://alice@github.com':", secrets[0], true), rec("a", "Name:", secrets[1], true),
		{SessionID: "a", PromptText: "Enter value:", Input: secrets[2], Success: true, Source: "user_typed", PromptType: TypeText,
			TTY: TTYState{EchoOff: new(true), CanonicalMode: new(true)}}}
	for _, e := range events {
		if _, _, err := s.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	for _, k := range keys {
		// Every key's content as text (DUMP could hide a value compressed).
		var content []string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				content = append(content, f, v)
			}
		case "zset":
			content = rdb.ZRange(ctx, k, 0, -1).Val()
		default:
			t.Fatalf("key %q of unexpected type %q", k, typ)
		}
		if len(content) == 0 {
			t.Fatalf("could not read key %q", k)
		}
		for _, sec := range secrets {
			if strings.Contains(k, sec) || slices.ContainsFunc(content, func(c string) bool { return strings.Contains(c, sec) }) {
				t.Errorf("key %q holds a secret", k)
			}
		}
	}
}

// TestRedisStoreUnavailable: with Redis gone every call answers
// ErrUnavailable, and works again when it is back.
func TestRedisStoreUnavailable(t *testing.T) {
	ctx := context.Background()
	srv, rdb := startRedis(t)
	s, _ := NewRedisStore(rdb, "", StoreConfig{})
	srv.Stop()
	calls := map[string]func() error{
		"Record":        func() error { _, _, err := s.Record(ctx, rec("a", "Name:", "x", true)); return err },
		"Learned":       func() error { _, err := s.Learned(ctx, "Name:", "a"); return err },
		"History":       func() error { _, err := s.History(ctx, "a", 10); return err },
		"DeleteSession": func() error { _, err := s.DeleteSession(ctx, "a"); return err },
		"Count":         func() error { _, err := s.Count(ctx, ""); return err },
		"Prune":         func() error { return s.Prune(ctx) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with Redis down: %v, want ErrUnavailable", name, err)
		}
	}
	srv.Start()
	if _, _, err := s.Record(ctx, rec("a", "Name:", "x", true)); err != nil {
		t.Fatalf("Record after Redis is back: %v", err)
	}
}

// BenchmarkStoreRecord measures recording one event and reading what a
// session learned, in SQLite (a temp file) and in Redis (a local
// redis-server over loopback TCP).
func BenchmarkStoreRecord(b *testing.B) {
	ctx := context.Background()
	srv := testredis.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	rs, _ := NewRedisStore(rdb, "", StoreConfig{})
	ss, err := OpenStore(filepath.Join(b.TempDir(), "e.db"), StoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	for name, s := range map[string]store{"sqlite": ss, "redis": rs} {
		b.Run(name+"/Record", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, _, err := s.Record(ctx, rec(fmt.Sprint("s", i%16), "Continue? [y/N]", "y", true)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/Learned", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Learned(ctx, "Continue? [y/N]", "s1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
