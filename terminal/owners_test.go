package terminal

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownerCounts returns what a store counts for each owner and in all,
// and what its events say (SQLite: the owners and total tables against
// the rows; Redis: t:oc against each owner's set, and the sets against
// t:all).
func ownerCounts(t *testing.T, s store) (kept, real map[string]int, keptTotal, realTotal int) {
	t.Helper()
	ctx := context.Background()
	kept, real = map[string]int{}, map[string]int{}
	switch s := s.(type) {
	case *Store:
		read := func(q string, into map[string]int) {
			rows, err := s.db.QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var o string
				var n int
				if err := rows.Scan(&o, &n); err != nil {
					t.Fatal(err)
				}
				into[o] = n
			}
		}
		read(`SELECT owner, n FROM owners`, kept)
		read(`SELECT owner, COUNT(*) FROM events GROUP BY owner`, real)
		if err := s.db.QueryRowContext(ctx, `SELECT n FROM total`).Scan(&keptTotal); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events`).Scan(&realTotal); err != nil {
			t.Fatal(err)
		}
		// Every row's owner is its session's.
		var wrong int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE owner != (CASE WHEN session_id GLOB ? THEN substr(session_id, 1, ?) ELSE '' END)`,
			ownerGlob, ownerLen-1).Scan(&wrong); err != nil || wrong != 0 {
			t.Fatalf("%d events with the wrong owner (%v)", wrong, err)
		}
	case *RedisStore:
		oc, err := s.rdb.ZRangeWithScores(ctx, s.prefix+"t:oc", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range oc {
			kept[z.Member.(string)] = int(z.Score)
		}
		all, err := s.rdb.ZRange(ctx, s.prefix+"t:all", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		realTotal = len(all)
		for _, id := range all {
			sess, err := s.rdb.HGet(ctx, s.prefix+"t:e:"+id, "session").Result()
			if err != nil {
				t.Fatal(err)
			}
			o := ownerKey(sess)
			if sc := s.rdb.ZScore(ctx, s.prefix+"t:o:"+o, id); sc.Err() != nil {
				t.Fatalf("event %s of owner %q is not in its owner's set: %v", id, o, sc.Err())
			}
			real[o]++
		}
		for o := range kept {
			keptTotal += kept[o]
		}
	default:
		t.Fatalf("no counts for %T", s)
	}
	return kept, real, keptTotal, realTotal
}

func checkOwnerCounts(t *testing.T, s store, what string) {
	t.Helper()
	kept, real, keptTotal, realTotal := ownerCounts(t, s)
	if !maps.Equal(kept, real) || keptTotal != realTotal {
		t.Errorf("%s: counts kept %v (total %d), events %v (total %d)", what, kept, keptTotal, real, realTotal)
	}
}

// TestOwnerCountsFollowEveryDelete: the counts the overall bound reads
// stay those of the events whoever deletes them: the session, owner and
// overall bounds, DeleteSession, age.
func TestOwnerCountsFollowEveryDelete(t *testing.T) {
	ctx := context.Background()
	forEachStore(t, StoreConfig{MaxPerSession: 4, MaxEvents: 30, MaxPerOwner: 7, MaxAge: time.Hour}, func(t *testing.T, s store) {
		base := time.Now().Add(-30 * time.Minute)
		for i := range 60 {
			sess := fmt.Sprint("anon-", i%3)
			if i%4 != 0 {
				sess = OwnedSessionID(fmt.Sprint("id", i%5), fmt.Sprint("s", i%3))
			}
			e := rec(sess, "Continue? [y/N]", "y", true)
			e.Time = base.Add(time.Duration(i) * time.Second)
			if i < 10 {
				e.Time = base.Add(-time.Hour) // past MaxAge
			}
			if _, _, err := s.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		checkOwnerCounts(t, s, "after records")
		if err := s.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		checkOwnerCounts(t, s, "after prune")
		if _, err := s.DeleteSession(ctx, OwnedSessionID("id1", "s1")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteSession(ctx, "anon-0"); err != nil {
			t.Fatal(err)
		}
		checkOwnerCounts(t, s, "after DeleteSession")
		if kept, _, total, _ := ownerCounts(t, s); total == 0 || len(kept) < 2 {
			t.Fatalf("counts %v: the test would test nothing", kept)
		}
	})
}

// TestMigrateCountsOwners opens a store an older version (schema 4)
// wrote: every event gets its owner and the owners their counts, and
// the overall bound then takes from the busiest of the old events too.
func TestMigrateCountsOwners(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{`input_len INTEGER NOT NULL DEFAULT 0`, `input_mac TEXT NOT NULL DEFAULT ''`, `rules INTEGER NOT NULL DEFAULT 0`} {
		if _, err := db.Exec(`ALTER TABLE events ADD COLUMN ` + col); err != nil {
			t.Fatal(err)
		}
	}
	bob := OwnedSessionID("bob", "b1")
	base := time.Now().Add(-time.Hour).UnixNano()
	n := 0
	insert := func(sess, input string) {
		n++
		if _, err := db.Exec(`INSERT INTO events VALUES (?, ?, 'Which one?', ?, 1, 'user_typed', 0, ?, 'text', ?, 0, '', ?)`,
			fmt.Sprint("id", n), sess, input, base+int64(n), PatternKey("Which one?"), SecretRules); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		insert(bob, "staging")
	}
	for range 4 {
		insert("anon-1", "dev")
	}
	for m := range 5 {
		for i := range 5 {
			insert(OwnedSessionID(fmt.Sprint("m", m), fmt.Sprint("s", i)), "y")
		}
	}
	if _, err := db.Exec(`INSERT INTO schema_version(version) VALUES (4)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// 32 events in a store of 22: the five busy identities give up
	// theirs (25 → 15, 3 each), bob's 3 and the 4 of no owner stay.
	s, err := OpenStore(path, StoreConfig{MaxEvents: 22, MaxPerOwner: 5, MaxAge: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	checkOwnerCounts(t, s, "after the migration")
	if h, err := s.History(ctx, bob, 10); err != nil || len(h) != 3 {
		t.Errorf("bob's history after the migration: %d events (%v), want 3", len(h), err)
	}
	if h, err := s.History(ctx, "anon-1", 10); err != nil || len(h) != 4 {
		t.Errorf("anon-1's history after the migration: %d events (%v), want 4", len(h), err)
	}
	if c, err := s.Count(ctx, ""); err != nil || c != 22 {
		t.Errorf("store holds %d (%v), want 22", c, err)
	}
	var v int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("schema version %d (%v), want %d", v, err, schemaVersion)
	}
	// The owner index is there and used: the overall bound reads it, not
	// the table.
	var plan strings.Builder
	rows, err := s.db.Query(`EXPLAIN QUERY PLAN SELECT id FROM events WHERE owner = ? ORDER BY created_at LIMIT 1`, "u")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(detail + "; ")
	}
	rows.Close()
	if !strings.Contains(plan.String(), "events_owner") || strings.Contains(plan.String(), "TEMP B-TREE") {
		t.Errorf("an owner's oldest event is found by %q, want the events_owner index", plan.String())
	}
}

// TestRedisIndexOlderEvents: events an older version wrote to Redis (no
// counts, the sessions of no owner in no owner's set) are indexed by
// Run, once, and the overall bound then takes from the busiest of them.
func TestRedisIndexOlderEvents(t *testing.T) {
	ctx := context.Background()
	_, rdb := startRedis(t)
	s, err := NewRedisStore(rdb, "", StoreConfig{MaxEvents: 1000, MaxPerOwner: 5})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i := range 3 {
		e := rec("anon-1", "Which one?", "dev", true)
		e.Time = base.Add(time.Duration(i) * time.Millisecond)
		if _, _, err := s.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for m := range 12 {
		for i := range 5 {
			e := rec(OwnedSessionID(fmt.Sprint("m", m), "s"), "Continue? [y/N]", "y", true)
			e.Time = base.Add(time.Second + time.Duration(m*5+i)*time.Millisecond)
			if _, _, err := s.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What an older version left: no counts, no set for no owner.
	if err := rdb.Del(ctx, s.prefix+"t:oc", s.prefix+"t:o:", s.prefix+"t:layout").Err(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(runCtx, time.Hour, func(err error) { t.Error(err) }); close(done) }()
	for deadline := time.Now().Add(10 * time.Second); rdb.Get(ctx, s.prefix+"t:layout").Val() != layoutVersion; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Run did not index in 10s")
		}
	}
	stop()
	<-done
	checkOwnerCounts(t, s, "after Index")
	s2, err := NewRedisStore(rdb, "", StoreConfig{MaxEvents: 50, MaxPerOwner: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := s2.History(ctx, "anon-1", 10); err != nil || len(h) != 3 {
		t.Errorf("anon-1's history after the bound fell to 50: %d events (%v), want 3", len(h), err)
	}
	checkOwnerCounts(t, s2, "after the prune")
	if err := s2.Index(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRedisTrimDropsStaleIDs: an id in an owner's set whose event is
// gone (an older replica removed it without knowing the set) leaves the
// set when the bound reaches it, and the bound still holds.
func TestRedisTrimDropsStaleIDs(t *testing.T) {
	ctx := context.Background()
	_, rdb := startRedis(t)
	s, err := NewRedisStore(rdb, "", StoreConfig{MaxEvents: 10})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i := range 10 {
		e := rec("anon-1", "Continue? [y/N]", "y", true)
		e.Time = base.Add(time.Second + time.Duration(i)*time.Millisecond)
		if _, _, err := s.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if err := rdb.ZAdd(ctx, s.prefix+"t:o:", redis.Z{Score: float64(base.UnixMicro() + int64(i)), Member: fmt.Sprint("gone", i)}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.ZAdd(ctx, s.prefix+"t:oc", redis.Z{Score: 15, Member: ""}).Err(); err != nil {
		t.Fatal(err)
	}
	quiet := OwnedSessionID("bob", "b1")
	if _, _, err := s.Record(ctx, rec(quiet, "Which one?", "staging", true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	checkOwnerCounts(t, s, "after the stale ids")
	if n, err := s.Count(ctx, ""); err != nil || n != 10 {
		t.Errorf("store holds %d (%v), want 10", n, err)
	}
	if n, err := s.Count(ctx, quiet); err != nil || n != 1 {
		t.Errorf("bob holds %d (%v), want 1", n, err)
	}
	if n := rdb.ZCard(ctx, s.prefix+"t:o:").Val(); n != 9 {
		t.Errorf("the set of no owner holds %d ids, want 9 (the stale ones gone)", n)
	}
}
