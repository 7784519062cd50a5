package server

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// TestHealthFloodPenalizesItsConnection: a health-check flood from a
// prober's address used up the peer's HealthChecksPerSecond, and its
// refusals counted as early resets of the peer, which closed or held
// back every connection of the address: the prober's checks went 16 of
// 16 answered to 10 of 10 DEADLINE_EXCEEDED (the seventeenth hostile
// pass). Now the flooding connection is refused and closed, its peer is
// not penalized, and a new connection of the same address (a kubelet's
// probe) has its checks answered, up to its own
// HealthCheckConnectionBurst, while the peer's rate is used up: a
// flooder reconnecting gets as few.
func TestHealthFloodPenalizesItsConnection(t *testing.T) {
	const addr = "192.0.2.2"
	g := NewRecvGuard(nil)
	in := g.refuseHeld(func(ctx context.Context, _ *tap.Info) (context.Context, error) { return ctx, nil })
	check := &tap.Info{FullMethodName: "/grpc.health.v1.Health/Check"}
	conn := func() (*recvConn, context.Context, func() bool) {
		c, other := peerConn(t, addr)
		c.resets = &rapidreset.Conn{Peers: g.peers, Peer: c.peer}
		ctx := context.WithValue(context.Background(), recvConnKey{}, c)
		ctx = context.WithValue(ctx, connResetsKey{}, newConnResets(c, g.peers))
		return c, ctx, func() bool { return closedConn(other) }
	}

	// The flood: on one connection, until refused, then on.
	_, flood, floodClosed := conn()
	answered, refused := 0, 0
	for i := 0; refused < HealthRefusalsPerConnection+10 && i < 100*HealthCheckBurst; i++ {
		_, err := in(flood, check)
		switch status.Code(err) {
		case codes.OK:
			answered++
		case codes.ResourceExhausted:
			refused++
		default:
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if refused == 0 || answered < HealthCheckBurst {
		t.Fatalf("the flood: %d answered, %d refused; want the peer's burst %d answered, then refusals", answered, refused, HealthCheckBurst)
	}
	if !floodClosed() {
		t.Fatalf("the flooding connection is open after %d refusals", refused)
	}
	if n := g.HealthFloodCloses(); n != 1 {
		t.Errorf("HealthFloodCloses %d, want 1", n)
	}
	if n := g.PenalizedPeers(); n != 0 {
		t.Errorf("the flooder's peer penalized %d times: its other clients' connections are held back", n)
	}
	if !g.peers.Admit(netip.MustParseAddr(addr)) {
		t.Error("a new connection of the flooder's address is held back")
	}

	// A prober of the same address: a new connection, answered.
	_, probe, probeClosed := conn()
	for i := range HealthCheckConnectionBurst {
		if _, err := in(probe, check); err != nil {
			t.Fatalf("the prober's check %d beside the flood: %v", i+1, err)
		}
	}
	if probeClosed() {
		t.Fatal("the prober's connection was closed")
	}
	// Past its own burst, with the peer's rate used up, a connection is
	// refused: a flooder reconnecting gets a burst a connection.
	refused = 0
	for range 100 {
		if _, err := in(probe, check); status.Code(err) == codes.ResourceExhausted {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("100 checks past a connection's own burst, the peer's used up: none refused")
	}
}

// TestHealthRefusalsCountedInAWindow: a connection's refused health
// checks close it only when HealthRefusalsPerConnection of them come
// within HealthRefusalWindow; a long-lived balancer of a flooding
// address, refused a few times now and then, stays open (counted over
// the connection's life, its 8th refusal closed it, however far apart:
// the eighteenth hostile pass).
func TestHealthRefusalsCountedInAWindow(t *testing.T) {
	const addr = "192.0.2.2"
	g := NewRecvGuard(nil)
	now := time.Unix(1e9, 0)
	g.now = func() time.Time { return now }
	in := g.refuseHeld(func(ctx context.Context, _ *tap.Info) (context.Context, error) { return ctx, nil })
	check := &tap.Info{FullMethodName: "/grpc.health.v1.Health/Check"}
	conn := func() (context.Context, func() bool) {
		c, other := peerConn(t, addr)
		c.resets = &rapidreset.Conn{Peers: g.peers, Peer: c.peer}
		ctx := context.WithValue(context.Background(), recvConnKey{}, c)
		ctx = context.WithValue(ctx, connResetsKey{}, newConnResets(c, g.peers))
		return ctx, func() bool { return closedConn(other) }
	}
	// flood uses up the peer's rate from connections of its own.
	flood := func() {
		t.Helper()
		for refused := 0; refused == 0; {
			ctx, _ := conn()
			for range HealthCheckBurst + HealthCheckConnectionBurst + 1 {
				if _, err := in(ctx, check); status.Code(err) == codes.ResourceExhausted {
					refused++
					break
				}
			}
		}
	}
	balancer, balancerClosed := conn()
	// checks sends n checks of the balancer, returning how many were refused.
	checks := func(n int) int {
		refused := 0
		for range n {
			if _, err := in(balancer, check); status.Code(err) == codes.ResourceExhausted {
				refused++
			}
		}
		return refused
	}
	for round := range 4 {
		flood()
		if r := checks(HealthCheckConnectionBurst + HealthRefusalsPerConnection - 1); r != HealthRefusalsPerConnection-1 {
			t.Fatalf("round %d: %d of the balancer's checks refused, want %d", round, r, HealthRefusalsPerConnection-1)
		}
		if balancerClosed() {
			t.Fatalf("round %d: the balancer's connection closed after %d refusals, each round's within its window", round, (round+1)*(HealthRefusalsPerConnection-1))
		}
		now = now.Add(HealthRefusalWindow)
	}
	// A flood on the balancer's own connection still closes it.
	flood()
	checks(HealthCheckConnectionBurst + HealthRefusalsPerConnection)
	if !balancerClosed() {
		t.Fatal("the balancer's connection is open after a flood of its own")
	}
}
