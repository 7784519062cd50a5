package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// waitPlaces waits until owner holds held places and all owners total;
// sessions end on the SDK's goroutines, so their places come back soon
// after, not at once.
func waitPlaces(t *testing.T, px *Proxy, owner string, total, held int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gotTotal, gotHeld := px.places.Count(owner)
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
// owner's share before it makes anything, that at the total a quieter
// owner takes the place of the busiest owner's least recently used
// session (ended, its exposure forgotten) and one as busy is refused, and
// that the place comes back when the session ends, or at once when none
// started.
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
	// Every place taken; bob holds fewer than alice: her least recently
	// used session, a1, makes way, and its exposure is gone before bob's
	// is made.
	_, served, err := px.NewSessionServer(bob)
	if err != nil {
		t.Fatalf("bob's second session, with alice the busiest: %v", err)
	}
	if total, held := px.places.Count("token:alice"); total != 3 || held != 1 || storeLen() != 3 {
		t.Fatalf("after bob took a1's place: %d places, %d alice's, %d exposures; want 3, 1, 3", total, held, storeLen())
	}
	if _, err := a1.ListTools(context.Background(), nil); err == nil {
		t.Fatal("a1, which made way, still serves its client")
	}
	served() // it never started
	waitPlaces(t, px, "token:alice", 2, 1)
	// Each of three holds one, as the busiest: refused.
	c1 := connectAs(t, px, server.Caller{Name: "carol", Quota: "token:carol"}, nil)
	if _, _, err := px.NewSessionServer(bob); !errors.Is(err, session.ErrLimit) {
		t.Fatalf("a fourth session of 3, bob as busy as the busiest: %v, want ErrLimit", err)
	}
	c1.Close()
	waitPlaces(t, px, "token:alice", 2, 1)
	if n := storeLen(); n != 2 {
		t.Fatalf("store holds %d exposures after a session ended, want 2", n)
	}

	// A server whose session never starts gives its place back when
	// served says so.
	_, served, err = px.NewSessionServer(alice)
	if err != nil {
		t.Fatalf("alice after one of hers ended: %v", err)
	}
	if total, held := px.places.Count("token:alice"); total != 3 || held != 2 {
		t.Fatalf("places before served: %d in all, %d alice's; want 3, 2", total, held)
	}
	served()
	if total, held := px.places.Count("token:alice"); total != 2 || held != 1 {
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
	if total, held := px.places.Count("token:bob"); total != 2 || held != 1 {
		t.Fatalf("places after a store refusal: %d in all, %d bob's; want 2, 1", total, held)
	}
}

// TestSessionPlacesChurn has agents of three owners open and end sessions
// at once over the SDK's in-memory transport, some never starting, some
// making way for a quieter owner's (run with -race): every place, client
// and exposure is gone at the end.
func TestSessionPlacesChurn(t *testing.T) {
	const perOwner = 3
	px, _ := newTestProxyConfig(t, nil, session.Config{MaxSessions: 8, MaxPerOwner: perOwner})
	owners := []server.Caller{{Name: "alice", Quota: "token:alice"}, {Name: "bob", Quota: "token:bob"}, {Name: "anonymous", Quota: "peer:127.0.0.1"}}
	var wg sync.WaitGroup
	var opened, refused, displaced atomic.Int32
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
				if _, held := px.places.Count(owner.Quota); held > perOwner {
					errs <- fmt.Errorf("%s holds %d places > %d", owner.Name, held, perOwner)
				}
				if i%4 == 3 { // the SDK refused the request: no session
					served()
					continue
				}
				if err := openAndClose(srv, served); ended(err) {
					// Its place was taken and the server closed the
					// session: nothing else ends one here.
					displaced.Add(1)
					continue
				} else if err != nil {
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
	clients, byID := len(px.clients), px.places.Named()
	px.mu.Unlock()
	n, err := px.sessions.Len(context.Background())
	if err != nil || clients != 0 || byID != 0 || n != 0 {
		t.Fatalf("after every session ended: %d clients, %d by id, %d exposures (%v), want none", clients, byID, n, err)
	}
	t.Logf("%d sessions opened and closed, %d refused, %d closed making way", opened.Load(), refused.Load(), displaced.Load())
}

// ended reports whether err says the session's connection ended (the
// in-memory transport's pipe closed under it).
func ended(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
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
