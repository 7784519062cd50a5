package server

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// The early-reset rule (package rapidreset) on the gRPC listener: a
// gRPC connection whose client cancels most of its calls before sending
// their message (an HTTP/2 "rapid reset": HEADERS then RST_STREAM, over
// and over) is closed, and its peer penalized. In the eleventh hostile
// pass four connections with no token sent 46,000 health Checks a second
// that way: the daemon used 1.4 cores (the client 0.1), and another
// identity's small Route went from p50 1.7 ms to 244-359 ms (p99 1.1 s).
// A client that cancels calls after sending their message, or lets their
// deadline pass, is not counted: a gRPC client sends a unary call's
// message with its headers. A call refused at its headers because its
// caller already has MaxWaitingPerCaller calls waiting for their message
// counts as early too (a flood of such calls was refused one by one,
// cheaply, but never closed the connection), once the oldest of those
// has waited StaleWaitingCall: a hub's honest calls wait only for their
// goroutine. A call admission refuses
// (RESOURCE_EXHAUSTED) is never early. A caught connection is
// closed at once (what it had sent is refused, nothing more is read).

// resetStats is the stats handler counting each connection's calls and
// its early resets, and each peer's (resetPeers).
type resetStats struct {
	closed *atomic.Int64
	peers  *rapidreset.Peers
}

type connResets struct {
	c *recvConn
	n *rapidreset.Conn
}

func newConnResets(c *recvConn, peers *rapidreset.Peers) *connResets {
	if c.resets == nil {
		c.resets = &rapidreset.Conn{Peers: peers, Peer: c.peer}
	}
	return &connResets{c: c, n: c.resets}
}

type (
	connResetsKey struct{}
	callArrived   struct{}
)

// ResetOption is the stats handler that closes the connections of the
// guard's listener whose clients reset most of their calls before their
// message (EarlyResetsMin); EarlyResetCloses counts them.
func (g *RecvGuard) ResetOption() grpc.ServerOption {
	return grpc.StatsHandler(resetStats{&g.resetCloses, g.peers})
}

// EarlyResetCloses is how many connections were closed for resetting
// most of their calls before their message.
func (g *RecvGuard) EarlyResetCloses() int64 { return g.resetCloses.Load() }

// Peers is the early-reset count of the guard's peers: the daemon's
// HTTP listeners count to it too, so that a peer penalized on one
// listener is on all.
func (g *RecvGuard) Peers() *rapidreset.Peers { return g.peers }

// PenalizedPeers is how many times a peer was penalized for its early
// resets (rapidreset.PeerEarlyResetsMin); PenalizedConnsRefused, how many
// new connections of penalized peers were closed unserved (the tarpit).
func (g *RecvGuard) PenalizedPeers() int64 { return g.peers.Penalties() }

// PenalizedConnsRefused: see PenalizedPeers.
func (g *RecvGuard) PenalizedConnsRefused() int64 { return g.peers.Refused() }

func (r resetStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if a, ok := info.RemoteAddr.(recvAddr); ok {
		return context.WithValue(ctx, connResetsKey{}, newConnResets(a.c, r.peers))
	}
	return ctx
}

func (resetStats) HandleConn(context.Context, stats.ConnStats) {}

// callState is a call's: whether its message arrived.
type callState struct {
	arrived atomic.Bool
}

func (resetStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if ctx.Value(connResetsKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, callArrived{}, &callState{})
}

func (r resetStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, ok := ctx.Value(callArrived{}).(*callState)
	if !ok {
		return
	}
	switch s := s.(type) {
	case *stats.InPayload:
		c.arrived.Store(true)
	case *stats.End:
		// A call the body budget cut (errRecvBudget) ends CANCELLED before
		// its message too, but the daemon ended it, not its client: a
		// client uploading many large messages at once had its
		// connection closed as a rapid resetter (the twelfth hostile pass).
		// A call admission refused is not early, at any rate: its client
		// sent it whole and read its answer (admission_refusals.go).
		r.ended(ctx, !c.arrived.Load() && status.Code(s.Error) == codes.Canceled && !errors.Is(context.Cause(ctx), errRecvBudget))
	}
}

// ended counts a call of ctx's connection and its peer, early or not,
// and closes the connection past the rule.
func (r resetStats) ended(ctx context.Context, early bool) {
	cr, ok := ctx.Value(connResetsKey{}).(*connResets)
	if !ok {
		return
	}
	if cr.n.Ended(early) {
		r.closed.Add(1)
		cr.c.closeCaught()
	}
}

// closeCaught closes c at once: it reads nothing more, and the calls it
// had sent (up to a read buffer of them) are refused by refuseHeld.
func (c *recvConn) closeCaught() {
	c.caught.Store(true)
	_ = c.Close()
}

// errHeld refuses the calls a caught connection had already sent.
var errHeld = status.Error(codes.ResourceExhausted, "this connection reset too many calls before their message: it is closed")

// refuseHeld, the first tap, counts the calls the taps see, and refuses
// at once every call of a connection the early-reset rule caught: the
// calls it had sent before it was caught (up to a read buffer of them)
// otherwise each still took a handler. A call the taps refuse for its
// caller's fault (UNAUTHENTICATED, PERMISSION_DENIED) and a health check
// past its peer's HealthChecksPerSecond count as early resets, as a 4xx
// does on the HTTP listeners: complete calls with no token were never
// counted, and cost the daemon 1.6-4 times their client's CPU, health
// checks (no token needed) 3.8 times (the sixteenth hostile pass). A
// call admission refuses here (RESOURCE_EXHAUSTED) does not count, at
// any rate: the refusal costs microseconds, and an honest hub of
// thousands of callers backing off as told is refused many times a
// second under overload (admission_refusals.go).
func (g *RecvGuard) refuseHeld(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		c, ok := ctx.Value(recvConnKey{}).(*recvConn)
		if !ok {
			return next(ctx, info)
		}
		c.tapped.Add(1) // seen (frames.go): not refused by the transport
		if c.caught.Load() {
			return ctx, errHeld
		}
		if strings.HasPrefix(info.FullMethodName, "/grpc.health.v1.Health/") && !g.health.take(c.peer) {
			resetStats{&g.resetCloses, g.peers}.ended(ctx, true)
			return ctx, errHealthChecks
		}
		ctx, err := next(ctx, info)
		if code := status.Code(err); code == codes.Unauthenticated || code == codes.PermissionDenied {
			resetStats{&g.resetCloses, g.peers}.ended(ctx, true)
		}
		return ctx, err
	}
}

// HealthChecksPerSecond bounds each peer's health checks (every loopback
// address one peer), after a burst of HealthCheckBurst: a probe checks
// every few seconds, a load balancer a few times a second.
const (
	HealthChecksPerSecond = 200
	HealthCheckBurst      = 2000
)

var errHealthChecks = status.Errorf(codes.ResourceExhausted, "more than %d health checks a second from this address", HealthChecksPerSecond)

// peerBuckets is a token bucket per peer (HealthChecksPerSecond, burst
// HealthCheckBurst), at most maxBucketPeers of them (past it they all
// start afresh). Its zero value is ready.
type peerBuckets struct {
	mu sync.Mutex
	l  keyedLimiters[netip.Addr]
}

const maxBucketPeers = 1 << 14

func (b *peerBuckets) take(peer netip.Addr) bool {
	b.mu.Lock()
	if b.l.max == 0 {
		b.l = keyedLimiters[netip.Addr]{r: HealthChecksPerSecond, b: HealthCheckBurst, max: maxBucketPeers}
	}
	l := b.l.get(peer)
	b.mu.Unlock()
	return l.Allow()
}
