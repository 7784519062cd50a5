package mcpplaces

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/session"
)

type headerTransport struct {
	owner string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(ownerHeader, h.owner)
	return http.DefaultTransport.RoundTrip(r)
}

func connectAs(url, owner string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headerTransport{owner}}}, nil)
}

// TestFullPlacesTakeFromTheBusiest: with every place taken, a caller
// holding fewer sessions than the busiest caller starts one in the place
// of that caller's least recently used session (by its last request),
// which is gone (the SDK's client reports its session missing) while the
// busiest caller's other sessions live on; a caller as busy as the
// busiest is refused 503, and each displaced session is counted once.
func TestFullPlacesTakeFromTheBusiest(t *testing.T) {
	var displaced atomic.Int32
	places := New(5, 3, func() { displaced.Add(1) })
	var refused countRefusals
	url := serve(t, places, 5, 3, &refused)
	held := map[string]*mcp.ClientSession{}
	t.Cleanup(func() {
		for _, cs := range held {
			_ = cs.Close()
		}
	})
	open := func(owner, name string) error {
		cs, err := connectAs(url, owner)
		if err == nil {
			held[name] = cs
		}
		return err
	}
	for _, s := range [][2]string{{"carol", "c0"}, {"carol", "c1"}, {"alice", "a0"}, {"alice", "a1"}, {"alice", "a2"}} {
		if err := open(s[0], s[1]); err != nil {
			t.Fatalf("%s opens %s: %v", s[0], s[1], err)
		}
	}
	// alice uses a0 again: a1 is her least recently used.
	if _, err := held["a0"].ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for i, s := range []struct {
		who, name, gone string // caller, its new session, the session that makes way
		ok              bool
	}{
		{"bob", "b0", "a1", true},  // alice holds 3, the most
		{"alice", "a3", "", false}, // alice 2, as carol: the busiest
		{"bob", "b1", "c0", true},  // alice and carol at 2: carol's c0 is older than alice's a2
		{"bob", "b2", "", false},   // bob 2, as alice and carol
	} {
		before := refused.total.Load()
		err := open(s.who, s.name)
		if (err == nil) != s.ok {
			t.Fatalf("step %d: %s opens %s: %v, want ok %v", i, s.who, s.name, err, s.ok)
		}
		if counted := refused.total.Load() > before; counted == s.ok {
			t.Fatalf("step %d: %s opens %s: counted as refused at the total: %v, want %v", i, s.who, s.name, counted, !s.ok)
		}
		if s.gone != "" {
			if _, err := held[s.gone].ListTools(context.Background(), nil); !errors.Is(err, mcp.ErrSessionMissing) {
				t.Fatalf("step %d: %s, which made way: %v, want %v", i, s.gone, err, mcp.ErrSessionMissing)
			}
			delete(held, s.gone)
		}
	}
	for name, cs := range held {
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("%s, which did not make way: %v", name, err)
		}
	}
	if total, _ := places.Count(""); total != 5 || displaced.Load() != 2 || refused.perClient.Load() != 0 {
		t.Fatalf("%d places, %d displaced, %d refused per client; want 5, 2, 0", total, displaced.Load(), refused.perClient.Load())
	}
}

// TestPlacesConcurrent has many goroutines of a few owners take places,
// hold them for sessions (in memory) and give them back at once, the
// quieter taking from the busier (run with -race): no owner ever holds
// more than its share nor all of them more than the total, a place
// another took is given back once (its session closed), and everything
// comes back.
func TestPlacesConcurrent(t *testing.T) {
	const (
		owners, perOwner, total = 4, 3, 10
		workers, rounds         = 32, 50
	)
	var displaced atomic.Int32
	places := New(total, perOwner, func() { displaced.Add(1) })
	var over atomic.Value // the first excess seen
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprint("owner-", w%owners)
			for range rounds {
				p, err := places.Take(owner)
				if err != nil {
					if !errors.Is(err, session.ErrOwnerLimit) && !errors.Is(err, session.ErrLimit) {
						over.CompareAndSwap(nil, "unexpected error: "+err.Error())
					}
					continue
				}
				if all, n := places.Count(owner); all > total || n > perOwner {
					over.CompareAndSwap(nil, fmt.Sprintf("%d held in all, %d by %s", all, n, owner))
				}
				// One server per session: in memory, sessions have no id.
				srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
				st, _ := mcp.NewInMemoryTransports()
				ss, err := srv.Connect(context.Background(), st, nil)
				if err != nil {
					over.CompareAndSwap(nil, "connect: "+err.Error())
					p.Give()
					continue
				}
				p.Hold(srv, ss.ID())
				runtime.Gosched()
				_ = ss.Close() // its end gives the place back, unless another took it
				p.Give()
			}
		})
	}
	wg.Wait()
	if v := over.Load(); v != nil {
		t.Fatal(v)
	}
	if all, _ := places.Count(""); all != 0 || places.Named() != 0 {
		t.Fatalf("after every give: %d places, %d named; want 0", all, places.Named())
	}
	if displaced.Load() == 0 {
		t.Logf("no place was taken from the busiest this run")
	}
}
