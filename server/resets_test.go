package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// TestRefusedCallFreesItsReceiveTimer: a call that a tap after arrivalTap
// refuses (the cap on calls waiting for their message) gets no handler,
// and gRPC never ends its context: its receive timer held it, and its
// stream, for the whole receive timeout. releaseRefused ends both.
func TestRefusedCallFreesItsReceiveTimer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  bool
		release bool
	}{
		{"refused after the timer started: released", true, true},
		{"let in: the timer runs", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := func(ctx context.Context, _ *tap.Info) (context.Context, error) {
				ctx = withArrival(ctx, time.Hour)
				if tc.refuse {
					return ctx, errRecvCalls
				}
				return ctx, nil
			}
			ctx, err := releaseRefused(chain)(context.Background(), &tap.Info{FullMethodName: "/grpc.health.v1.Health/Check"})
			if (err != nil) != tc.refuse {
				t.Fatalf("err %v, refused %v", err, tc.refuse)
			}
			a := ctx.Value(arrivalKey{}).(*arrival)
			select {
			case <-a.released:
				if !tc.release {
					t.Fatal("the receive timer of a call let in was released")
				}
			case <-time.After(2 * time.Second):
				if tc.release {
					t.Fatal("a refused call's receive timer still holds it")
				}
			}
		})
	}
}

// Calls that end CANCELLED before their message are early resets when
// their client reset them, not when the body budget cut them: a client
// uploading many large messages at once was closed as a rapid resetter
// (the twelfth hostile pass).
func TestBudgetCutsAreNotEarlyResets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cause    error
		wantHeld bool
	}{
		{"reset by the client", nil, true},
		{"cut by the body budget", errRecvBudget, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := peerConn(t, "192.0.2.1")
			var closed atomic.Int64
			r := resetStats{&closed, nil}
			conn := context.WithValue(context.Background(), connResetsKey{}, newConnResets(c, nil))
			for range 2 * rapidreset.EarlyResetsMin {
				ctx, cancel := context.WithCancelCause(conn)
				cancel(tc.cause) // nil: context.Canceled, as a client's reset
				ctx = r.TagRPC(ctx, &stats.RPCTagInfo{})
				r.HandleRPC(ctx, &stats.End{Error: status.Error(codes.Canceled, "context canceled")})
			}
			if held := c.caught.Load(); held != tc.wantHeld || (closed.Load() == 1) != tc.wantHeld {
				t.Errorf("caught %v, closes %d; want caught %v", held, closed.Load(), tc.wantHeld)
			}
		})
	}
}

// endCalls ends n calls of conn, early (reset before their message) or
// not, through the stats handler as gRPC does.
func endCalls(r resetStats, conn context.Context, n int, early bool) {
	for range n {
		ctx, cancel := context.WithCancel(conn)
		ctx = r.TagRPC(ctx, &stats.RPCTagInfo{})
		var err error
		if early {
			cancel()
			err = status.Error(codes.Canceled, "context canceled")
		} else {
			r.HandleRPC(ctx, &stats.InPayload{})
		}
		r.HandleRPC(ctx, &stats.End{Error: err})
		cancel()
	}
}

// peerConn is a counted connection of peer (a pipe's end: closing it is
// seen on the other).
func peerConn(t *testing.T, peer string) (*recvConn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &recvConn{Conn: a, peer: netip.MustParseAddr(peer)}, b
}

func closedConn(other net.Conn) bool {
	_ = other.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := other.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

// TestEarlyResetsCountedPerPeer: a client that resets 63 calls on each
// connection and opens another (the twelfth hostile pass) is caught by
// its peer's count; then each of its connections is closed at its
// rapidreset.PenalizedEarlyResetsMin-th early reset and its new connections are
// limited to rapidreset.PenalizedConnsPerSecond, while its connections whose calls
// carry their message, and other peers, are untouched.
func TestEarlyResetsCountedPerPeer(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	peers := rapidreset.NewAt(func() time.Time { return now })
	var penalized []netip.Addr
	peers.OnPenalty(func(p netip.Addr, _, _ int64, _ time.Time) { penalized = append(penalized, p) })
	var closes atomic.Int64
	r := resetStats{&closes, peers}
	tag := func(c *recvConn) context.Context {
		return context.WithValue(context.Background(), connResetsKey{}, newConnResets(c, peers))
	}
	const bad, good, other = "192.0.2.66", "192.0.2.66", "198.51.100.7"

	// A connection of the same address whose calls carry their message
	// (another client behind it), open throughout.
	steady, steadyOther := peerConn(t, good)
	steadyCtx := tag(steady)
	endCalls(r, steadyCtx, 10, false)

	// Four connections of 63 early resets each, and 4 more on a fifth:
	// 256 early resets of the peer, no connection at the rule's 64.
	for i := range 5 {
		c, o := peerConn(t, bad)
		n := rapidreset.EarlyResetsMin - 1
		if i == 4 {
			n = rapidreset.PeerEarlyResetsMin - 4*(rapidreset.EarlyResetsMin-1)
		}
		endCalls(r, tag(c), n, true)
		if closedConn(o) {
			t.Fatalf("connection %d closed before the peer's %d early resets", i, rapidreset.PeerEarlyResetsMin)
		}
	}
	if len(penalized) != 1 || penalized[0] != netip.MustParseAddr(bad) {
		t.Fatalf("penalized %v after %d early resets, want [%s]", penalized, rapidreset.PeerEarlyResetsMin, bad)
	}

	// Penalized: a new connection is closed at its 8th early reset.
	c, o := peerConn(t, bad)
	cctx := tag(c)
	endCalls(r, cctx, rapidreset.PenalizedEarlyResetsMin-1, true)
	if closedConn(o) {
		t.Fatalf("closed before its %dth early reset", rapidreset.PenalizedEarlyResetsMin)
	}
	endCalls(r, cctx, 1, true)
	if !closedConn(o) {
		t.Fatalf("a penalized peer's connection with %d early resets is open", rapidreset.PenalizedEarlyResetsMin)
	}
	// The steady connection resets a few calls now and then: it is open.
	endCalls(r, steadyCtx, 3, true)
	endCalls(r, steadyCtx, 100, false)
	endCalls(r, steadyCtx, rapidreset.PenalizedEarlyResetsMin, true)
	if closedConn(steadyOther) {
		t.Fatal("the peer's connection whose calls mostly carry their message was closed")
	}

	// New connections: a burst, then rapidreset.PenalizedConnsPerSecond a second.
	badAddr, otherAddr := netip.MustParseAddr(bad), netip.MustParseAddr(other)
	admitted := 0
	for range 20 {
		if peers.Admit(badAddr) {
			admitted++
		}
	}
	if admitted != rapidreset.PenalizedConnBurst {
		t.Errorf("admitted %d of 20 new connections at once, want the burst %d", admitted, rapidreset.PenalizedConnBurst)
	}
	now = now.Add(time.Second)
	admitted = 0
	for range 20 {
		if peers.Admit(badAddr) {
			admitted++
		}
	}
	if admitted != rapidreset.PenalizedConnsPerSecond {
		t.Errorf("admitted %d a second later, want %d", admitted, rapidreset.PenalizedConnsPerSecond)
	}
	for range 20 {
		if !peers.Admit(otherAddr) {
			t.Fatal("another peer's new connection was refused")
		}
	}

	// The penalty ends: the peer connects freely and is counted anew.
	now = now.Add(rapidreset.PeerResetPenalty)
	for range 20 {
		if !peers.Admit(badAddr) {
			t.Fatal("refused after the penalty")
		}
	}
	c, o = peerConn(t, bad)
	endCalls(r, tag(c), rapidreset.EarlyResetsMin-1, true)
	if closedConn(o) {
		t.Fatal("after the penalty a connection was closed under the rule's 64")
	}
}

// TestShortDeadlinesDoNotPenalize: a client whose short deadlines expire
// before the daemon reads some of its messages (the thirteenth hostile
// pass: 32 Routes at once with 5 ms deadlines penalized 127.0.0.1) has
// many early resets but fewer than its calls carrying their message: its
// peer is not penalized, and its connections stay open. A connection
// caught by the rule per connection penalizes its peer at once.
func TestShortDeadlinesDoNotPenalize(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	peers := rapidreset.NewAt(func() time.Time { return now })
	var closes atomic.Int64
	r := resetStats{&closes, peers}
	tag := func(c *recvConn) context.Context {
		return context.WithValue(context.Background(), connResetsKey{}, newConnResets(c, peers))
	}
	c, o := peerConn(t, "192.0.2.5")
	ctx := tag(c)
	for range 100 { // 4 of every 10 calls expire before their message is read
		endCalls(r, ctx, 6, false)
		endCalls(r, ctx, 4, true)
	}
	if peers.Penalties() != 0 || closedConn(o) {
		t.Fatalf("400 early resets of 1,000 calls: penalized %d, closed %v", peers.Penalties(), closedConn(o))
	}
	// Another peer's connection resets 64 calls of 64: closed, and its
	// peer penalized at once.
	c2, o2 := peerConn(t, "198.51.100.9")
	endCalls(r, tag(c2), rapidreset.EarlyResetsMin, true)
	if !closedConn(o2) || peers.Penalties() != 1 {
		t.Fatalf("a connection of %d early resets: closed %v, penalties %d", rapidreset.EarlyResetsMin, closedConn(o2), peers.Penalties())
	}
	if !peers.Admit(netip.MustParseAddr("198.51.100.9")) || !peers.Admit(netip.MustParseAddr("192.0.2.5")) {
		t.Fatal("admit: the penalized peer's burst, or the other peer")
	}
}
