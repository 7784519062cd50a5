package listeners

import (
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// authenticate marks the server side sc of a connection authenticated, as
// the gRPC interceptors and the HTTP guards do.
func authenticate(l *Limiter, sc net.Conn) {
	l.Authenticated(sc.LocalAddr().String(), sc.RemoteAddr().String())
}

// TestLimiterEvictPerPeer: at the per-peer cap with EvictUnauthenticated,
// a new connection of the peer takes the place of the peer's oldest
// connection that carried no authenticated request; an authenticated one
// is never evicted, and another peer's not either; when every one of the
// peer's is authenticated the new one is refused as before.
func TestLimiterEvictPerPeer(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLimiter(ConnLimits{PerPeer: 3, Total: 100, EvictUnauthenticated: true}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	other := dialFrom(t, s, "127.0.0.2") // the oldest of all, another peer's
	s.accepted(t)
	var cs, ss []net.Conn
	for range 3 {
		cs = append(cs, dialFrom(t, s, "127.0.0.1"))
		ss = append(ss, s.accepted(t))
	}
	authenticate(l, ss[0]) // the oldest of the peer: kept
	c3 := dialFrom(t, s, "127.0.0.1")
	s3 := s.accepted(t)
	if !closedSoon(cs[1], 2*time.Second) {
		t.Fatal("the oldest unauthenticated connection of the peer was not evicted")
	}
	for i, c := range []net.Conn{cs[0], cs[2], c3, other} {
		if closedSoon(c, 100*time.Millisecond) {
			t.Fatalf("connection %d closed; only the oldest unauthenticated one should be", i)
		}
	}
	if got := metricValue(t, reg, "classifierd_connections_evicted_total", "test", EvictedPerPeer); got != 1 {
		t.Errorf("evicted per_peer = %v, want 1", got)
	}
	// The server closing the evicted connection gives back nothing more.
	ss[1].Close()
	if total, peer := l.Count("127.0.0.1"); total != 4 || peer != 3 {
		t.Errorf("open %d, peer's %d, want 4 and 3", total, peer)
	}
	if got := metricValue(t, reg, "classifierd_connections_open", "test", ""); got != 4 {
		t.Errorf("gauge = %v, want 4", got)
	}
	// Every connection of the peer authenticated: refused, none evicted.
	authenticate(l, ss[2])
	authenticate(l, s3)
	if c := dialFrom(t, s, "127.0.0.1"); !closedSoon(c, 2*time.Second) {
		t.Fatal("a connection past the cap was admitted with nothing to evict")
	}
	for i, c := range []net.Conn{cs[0], cs[2], c3, other} {
		if closedSoon(c, 100*time.Millisecond) {
			t.Fatalf("authenticated connection %d evicted", i)
		}
	}
	if got := metricValue(t, reg, "classifierd_connections_refused_total", "test", RefusedPerPeer); got != 1 {
		t.Errorf("refused per_peer = %v, want 1", got)
	}
	if got := metricValue(t, reg, "classifierd_connections_evicted_total", "test", EvictedPerPeer); got != 1 {
		t.Errorf("evicted per_peer = %v, want still 1", got)
	}
}

// TestLimiterEvictTotal: at the total cap, the oldest unauthenticated
// connection of any peer makes room.
func TestLimiterEvictTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLimiter(ConnLimits{Total: 3, EvictUnauthenticated: true}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	a := dialFrom(t, s, "127.0.0.1")
	authenticate(l, s.accepted(t))
	b := dialFrom(t, s, "127.0.0.2")
	s.accepted(t)
	c := dialFrom(t, s, "127.0.0.3")
	s.accepted(t)
	d := dialFrom(t, s, "127.0.0.4")
	sd := s.accepted(t)
	if !closedSoon(b, 2*time.Second) {
		t.Fatal("the oldest unauthenticated connection was not evicted at the total cap")
	}
	for i, x := range []net.Conn{a, c, d} {
		if closedSoon(x, 100*time.Millisecond) {
			t.Fatalf("connection %d closed", i)
		}
	}
	authenticate(l, sd)
	e := dialFrom(t, s, "127.0.0.5")
	s.accepted(t)
	if !closedSoon(c, 2*time.Second) {
		t.Fatal("the only unauthenticated connection was not evicted")
	}
	if got := metricValue(t, reg, "classifierd_connections_evicted_total", "test", EvictedTotal); got != 2 {
		t.Errorf("evicted total = %v, want 2", got)
	}
	// e is unauthenticated and the newest: a sixth evicts it.
	f := dialFrom(t, s, "127.0.0.6")
	s.accepted(t)
	if !closedSoon(e, 2*time.Second) || closedSoon(f, 100*time.Millisecond) {
		t.Fatal("the sixth connection did not take the fifth's place")
	}
	if total, _ := l.Count(""); total != 3 {
		t.Errorf("open %d, want 3", total)
	}
}

// TestLimiterNoEvictWithoutAuth: without EvictUnauthenticated the caps
// refuse as before, Authenticated or not.
func TestLimiterNoEvictWithoutAuth(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLimiter(ConnLimits{PerPeer: 2, Total: 100}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	var cs []net.Conn
	for range 2 {
		cs = append(cs, dialFrom(t, s, "127.0.0.1"))
		s.accepted(t)
	}
	l.Authenticated("x", "y") // ignored
	if c := dialFrom(t, s, "127.0.0.1"); !closedSoon(c, 2*time.Second) {
		t.Fatal("a connection past the cap was admitted without eviction configured")
	}
	for _, c := range cs {
		if closedSoon(c, 100*time.Millisecond) {
			t.Fatal("a connection was evicted without eviction configured")
		}
	}
	if got := metricValue(t, reg, "classifierd_connections_evicted_total", "test", EvictedPerPeer); got != 0 {
		t.Errorf("evicted = %v, want 0", got)
	}
}

// TestLimiterEvictConcurrent: evictions racing the server's own closes
// (twice, at once), authentications and new connections leave every
// place given back exactly once (run with -race).
func TestLimiterEvictConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLimiter(ConnLimits{PerPeer: 4, Total: 7, EvictUnauthenticated: true}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case c := <-s.conns:
				wg.Go(func() {
					if rand.IntN(3) == 0 {
						authenticate(l, c)
					}
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					var cw sync.WaitGroup
					cw.Go(func() { c.Close() })
					cw.Go(func() { c.Close() })
					cw.Wait()
				})
			case <-stop:
				return
			}
		}
	})
	dials := dialStorm(s)
	waitUncounted(t, l)
	close(stop)
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.peers) != 0 || l.unauth.Len() != 0 || len(l.peerUnauth) != 0 || len(l.byAddr) != 0 {
		t.Errorf("left behind: peers %v, evictable %d, by peer %d, by address %d", l.peers, l.unauth.Len(), len(l.peerUnauth), len(l.byAddr))
	}
	if got := metricValue(t, reg, "classifierd_connections_open", "test", ""); got != 0 {
		t.Errorf("gauge = %v, want 0", got)
	}
	t.Logf("%d connections, %v evicted per peer, %v in all", dials,
		metricValue(t, reg, "classifierd_connections_evicted_total", "test", EvictedPerPeer),
		metricValue(t, reg, "classifierd_connections_evicted_total", "test", EvictedTotal))
}
