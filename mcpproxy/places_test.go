package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
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
			{"take", "alice", nil}, {"take", "alice", nil}, {"take", "alice", session.ErrOwnerLimit},
			{"take", "bob", nil},
		}, 3, map[string]int{"alice": 2, "bob": 1}},
		{"a place given back is taken again", 10, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"give", "alice", nil}, {"take", "alice", nil},
			{"take", "alice", session.ErrOwnerLimit},
		}, 2, map[string]int{"alice": 2}},
		{"every place taken", 3, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"take", "bob", nil}, {"take", "bob", session.ErrLimit},
			{"take", "carol", session.ErrLimit}, {"give", "alice", nil}, {"take", "carol", nil},
		}, 3, map[string]int{"alice": 1, "bob": 1, "carol": 1}},
		{"an owner's share is checked first", 2, 2, []step{
			{"take", "alice", nil}, {"take", "alice", nil}, {"take", "alice", session.ErrOwnerLimit},
		}, 2, map[string]int{"alice": 2}},
		{"a give without a take changes nothing", 3, 2, []step{
			{"give", "alice", nil}, {"take", "bob", nil}, {"give", "alice", nil},
		}, 1, map[string]int{"alice": 0, "bob": 1}},
		{"every place given back", 3, 3, []step{
			{"take", "", nil}, {"take", "", nil}, {"give", "", nil}, {"give", "", nil},
		}, 0, map[string]int{"": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newPlaces(tc.max, tc.per)
			for i, s := range tc.steps {
				if s.op == "give" {
					q.give(s.owner)
					continue
				}
				if err := q.take(s.owner); !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
					t.Fatalf("step %d: take(%q) = %v, want %v", i, s.owner, err, s.wantErr)
				}
			}
			for owner, want := range tc.wantHeld {
				total, held := q.count(owner)
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
	q := newPlaces(5, 1)
	_ = q.take("alice")
	if err := q.take("alice"); err == nil || err.Error() != "session: too many sessions for this client (limit 1)" {
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
	q := newPlaces(total, perOwner)
	var held [owners]atomic.Int32
	var all, refused atomic.Int32
	var over atomic.Value // the first excess seen
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			o := w % owners
			owner := fmt.Sprint("owner-", o)
			for range rounds {
				if err := q.take(owner); err != nil {
					if !errors.Is(err, session.ErrOwnerLimit) && !errors.Is(err, session.ErrLimit) {
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
				q.give(owner)
			}
		})
	}
	wg.Wait()
	if v := over.Load(); v != nil {
		t.Fatal(v)
	}
	for o := range owners {
		if total, held := q.count(fmt.Sprint("owner-", o)); total != 0 || held != 0 {
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

// waitPlaces waits until owner holds held places and all owners total;
// sessions end on the SDK's goroutines, so their places come back soon
// after, not at once.
func waitPlaces(t *testing.T, px *Proxy, owner string, total, held int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gotTotal, gotHeld := px.places.count(owner)
		if gotTotal == total && gotHeld == held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("places: %d in all, %d of %s; want %d, %d", gotTotal, gotHeld, owner, total, held)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSessionPlaces checks that NewSessionServer takes a place of its
// owner's share before it makes anything and that the place comes back
// when the session ends, or at once when none started.
func TestSessionPlaces(t *testing.T) {
	px, _ := newTestProxyConfig(t, nil, session.Config{MaxSessions: 3, MaxPerOwner: 2})
	alice := server.Caller{Name: "alice", Quota: "token:alice"}
	bob := server.Caller{Name: "bob", Quota: "token:bob"}
	storeLen := func() int {
		n, err := px.sessions.Len(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	a1 := connectAs(t, px, alice, nil)
	connectAs(t, px, alice, nil)
	if _, _, err := px.NewSessionServer(alice); !errors.Is(err, session.ErrOwnerLimit) {
		t.Fatalf("alice's third session: %v, want ErrOwnerLimit", err)
	}
	if n := storeLen(); n != 2 {
		t.Fatalf("store holds %d exposures after a refusal, want 2: a refused session makes nothing", n)
	}
	connectAs(t, px, bob, nil)
	if _, _, err := px.NewSessionServer(bob); !errors.Is(err, session.ErrLimit) {
		t.Fatalf("a fourth session of 3: %v, want ErrLimit", err)
	}

	a1.Close()
	waitPlaces(t, px, "token:alice", 2, 1)
	if n := storeLen(); n != 2 {
		t.Fatalf("store holds %d exposures after a session ended, want 2", n)
	}

	// A server whose session never starts gives its place back when
	// served says so.
	_, served, err := px.NewSessionServer(alice)
	if err != nil {
		t.Fatalf("alice after one of hers ended: %v", err)
	}
	if total, held := px.places.count("token:alice"); total != 3 || held != 2 {
		t.Fatalf("places before served: %d in all, %d alice's; want 3, 2", total, held)
	}
	served()
	if total, held := px.places.count("token:alice"); total != 2 || held != 1 {
		t.Fatalf("places after served without a session: %d in all, %d alice's; want 2, 1", total, held)
	}
	px.mu.Lock()
	kept := len(px.clients)
	px.mu.Unlock()
	if kept != 2 || storeLen() != 2 {
		t.Fatalf("%d clients, %d exposures after an unstarted session, want 2 each", kept, storeLen())
	}

	// A store that refuses (closed) takes no place either.
	if err := px.sessions.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := px.NewSessionServer(bob); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("closed store: %v, want ErrClosed", err)
	}
	if total, held := px.places.count("token:bob"); total != 2 || held != 1 {
		t.Fatalf("places after a store refusal: %d in all, %d bob's; want 2, 1", total, held)
	}
}

// TestSessionPlacesChurn has agents of three owners open and end sessions
// at once over the SDK's in-memory transport, some never starting (run
// with -race): every place, client and exposure is gone at the end.
func TestSessionPlacesChurn(t *testing.T) {
	const perOwner = 3
	px, _ := newTestProxyConfig(t, nil, session.Config{MaxSessions: 8, MaxPerOwner: perOwner})
	owners := []server.Caller{{Name: "alice", Quota: "token:alice"}, {Name: "bob", Quota: "token:bob"}, {Name: "anonymous", Quota: "peer:127.0.0.1"}}
	var wg sync.WaitGroup
	var opened, refused atomic.Int32
	errs := make(chan error, 64)
	for w := range 24 {
		wg.Go(func() {
			owner := owners[w%len(owners)]
			for i := range 15 {
				srv, served, err := px.NewSessionServer(owner)
				if errors.Is(err, session.ErrOwnerLimit) || errors.Is(err, session.ErrLimit) {
					refused.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if _, held := px.places.count(owner.Quota); held > perOwner {
					errs <- fmt.Errorf("%s holds %d places > %d", owner.Name, held, perOwner)
				}
				if i%4 == 3 { // the SDK refused the request: no session
					served()
					continue
				}
				if err := openAndClose(srv, served); err != nil {
					errs <- err
					return
				}
				opened.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, o := range owners {
		waitPlaces(t, px, o.Quota, 0, 0)
	}
	px.mu.Lock()
	clients, byID := len(px.clients), len(px.bySession)
	px.mu.Unlock()
	n, err := px.sessions.Len(context.Background())
	if err != nil || clients != 0 || byID != 0 || n != 0 {
		t.Fatalf("after every session ended: %d clients, %d by id, %d exposures (%v), want none", clients, byID, n, err)
	}
	t.Logf("%d sessions opened and closed, %d refused", opened.Load(), refused.Load())
}

// openAndClose connects a client to srv in memory, lists its tools and
// ends the session.
func openAndClose(srv *mcp.Server, served func()) error {
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		served()
		return err
	}
	served()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "churn"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return err
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		cs.Close()
		return err
	}
	return cs.Close()
}
