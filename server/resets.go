package server

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"golang.org/x/time/rate"
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

// UnreadData is how many bytes of DATA the gRPC connections read that
// no call read: the bodies of calls the taps or the transport refused,
// and frames on streams already ended.
func (g *RecvGuard) UnreadData() int64 { return g.unreadBytes.Load() }

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

// callState is a call's: whether its message arrived, and its count as
// under way on its connection n (rapidreset.Conn.Begin), from its Begin
// to its End (grpc-go reports both for a method it serves, and neither
// for one it answers UNIMPLEMENTED).
type callState struct {
	arrived atomic.Bool
	n       *rapidreset.Conn
	end     func()
}

func (resetStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	cr, ok := ctx.Value(connResetsKey{}).(*connResets)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, callArrived{}, &callState{n: cr.n})
}

func (r resetStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, ok := ctx.Value(callArrived{}).(*callState)
	if !ok {
		return
	}
	switch s := s.(type) {
	case *stats.InPayload:
		c.arrived.Store(true)
	case *stats.Begin:
		c.end = c.n.Begin()
	case *stats.End:
		if c.end != nil {
			c.end()
		}
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
// caller's fault (UNAUTHENTICATED, PERMISSION_DENIED) counts as an early
// reset, as a 4xx does on the HTTP listeners: complete calls with no
// token were never counted, and cost the daemon 1.6-4 times their
// client's CPU (the sixteenth hostile pass). A call refused for its
// caller's rates of bytes does not count either (bodyrate.go). A call admission refuses
// here (RESOURCE_EXHAUSTED) does not count, at any rate: the refusal
// costs microseconds, and an honest hub of thousands of callers backing
// off as told is refused many times a second under overload
// (admission_refusals.go). Health checks are bounded by healthCheck,
// whose refusals are the connection's alone.
func (g *RecvGuard) refuseHeld(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		c, ok := ctx.Value(recvConnKey{}).(*recvConn)
		if !ok {
			return next(ctx, info)
		}
		c.tapped.Add(1) // seen (frames.go): not refused by the transport
		ctx, err := g.refuseHeldOf(c, next, ctx, info)
		if err != nil {
			c.refusedTaps.Add(1) // its DATA is read by no call (unread.go)
		}
		return ctx, err
	}
}

func (g *RecvGuard) refuseHeldOf(c *recvConn, next tap.ServerInHandle, ctx context.Context, info *tap.Info) (context.Context, error) {
	if c.caught.Load() {
		if c.healthFlood.Load() {
			return ctx, errHealthFlood
		}
		return ctx, errHeld
	}
	if strings.HasPrefix(info.FullMethodName, "/grpc.health.v1.Health/") && !g.healthCheck(c) {
		return ctx, errHealthChecks
	}
	ctx, err := next(ctx, info)
	if code := status.Code(err); code == codes.Unauthenticated || code == codes.PermissionDenied {
		resetStats{&g.resetCloses, g.peers}.ended(ctx, true)
	}
	return ctx, err
}

// HealthChecksPerSecond bounds each peer's health checks (every loopback
// address one peer), after a burst of HealthCheckBurst: a probe checks
// every few seconds, a load balancer a few times a second. Health needs
// no token, and a flood of checks cost the daemon 3.8 times its client's
// CPU (the sixteenth hostile pass: HPACK references).
//
// A connection's own HealthChecksPerConnection a second, after a burst
// of HealthCheckConnectionBurst, are answered whatever its peer's rate
// (a kubelet or grpc_health_probe opens a connection per check, a
// balancer checks a few services a second on one): a flood from a
// prober's address used up the peer's rate, and its refusals counted as
// early resets of the peer, whose new connections were then held back,
// so the prober's own checks went 16 of 16 answered to 10 of 10
// DEADLINE_EXCEEDED (the seventeenth hostile pass). Past both, a check
// is refused RESOURCE_EXHAUSTED and counted to its connection alone:
// at its HealthRefusalsPerConnection-th refusal within
// HealthRefusalWindow the connection is closed, and its peer is not
// penalized. Counted over a connection's whole life, the refusals of a
// long-lived balancer behind a flooding address, however far apart,
// added up to its close (the eighteenth hostile pass); in a window only
// a flood closes it. A flooder is bounded all the
// same: its connection ends after a few refusals, a new one costs it a
// TCP (and TLS) handshake for the few checks it then gets (16 loops of
// checks reconnecting cost the daemon 1.0 times their client's CPU,
// with HPACK references 1.6 times), and a peer holds at most
// --max-conns-per-peer connections. Holding a flooder's new connections
// back, as a penalty does, would hold its prober's too.
const (
	HealthChecksPerSecond       = 200
	HealthCheckBurst            = 2000
	HealthChecksPerConnection   = 5
	HealthCheckConnectionBurst  = 10
	HealthRefusalsPerConnection = 8
	HealthRefusalWindow         = 10 * time.Second
)

var (
	errHealthChecks = status.Errorf(codes.ResourceExhausted, "more than %d health checks a second from this address, and more than %d on this connection", HealthChecksPerSecond, HealthChecksPerConnection)
	errHealthFlood  = status.Errorf(codes.ResourceExhausted, "this connection sent health checks past their rate after %d refusals in %v: it is closed", HealthRefusalsPerConnection, HealthRefusalWindow)
)

// healthCheck reports whether a health check of c is answered (see
// HealthChecksPerSecond): within c's own rate, else within its peer's.
// A refused one is counted to c, closed at its
// HealthRefusalsPerConnection-th within HealthRefusalWindow.
func (g *RecvGuard) healthCheck(c *recvConn) bool {
	now := time.Now()
	if g.now != nil {
		now = g.now()
	}
	if c.healthChecks().AllowN(now, 1) || g.health.take(c.peer, now) {
		return true
	}
	if c.healthRefusal(now) && !c.healthFlood.Swap(true) {
		g.healthCloses.Add(1)
		c.closeCaught()
	}
	return false
}

// healthRefusal counts a refused health check of c at now and reports
// whether it is the HealthRefusalsPerConnection-th of the window
// (HealthRefusalWindow from the first refusal counted in it).
func (c *recvConn) healthRefusal(now time.Time) bool {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	if c.healthRefused == 0 || now.Sub(c.healthSince) >= HealthRefusalWindow {
		c.healthSince, c.healthRefused = now, 0
	}
	c.healthRefused++
	return c.healthRefused == HealthRefusalsPerConnection
}

// healthChecks is c's own bucket of health checks, made at its first.
func (c *recvConn) healthChecks() *rate.Limiter {
	c.healthOnce.Do(func() { c.healthOwn = rate.NewLimiter(HealthChecksPerConnection, HealthCheckConnectionBurst) })
	return c.healthOwn
}

// HealthFloodCloses is how many connections were closed for health
// checks past their rate (HealthRefusalsPerConnection).
func (g *RecvGuard) HealthFloodCloses() int64 { return g.healthCloses.Load() }

// peerBuckets is a token bucket per peer (HealthChecksPerSecond, burst
// HealthCheckBurst), at most maxBucketPeers of them (past it they all
// start afresh). Its zero value is ready.
type peerBuckets struct {
	mu sync.Mutex
	l  keyedLimiters[netip.Addr]
}

const maxBucketPeers = 1 << 14

func (b *peerBuckets) take(peer netip.Addr, now time.Time) bool {
	b.mu.Lock()
	if b.l.max == 0 {
		b.l = keyedLimiters[netip.Addr]{r: HealthChecksPerSecond, b: HealthCheckBurst, max: maxBucketPeers}
	}
	l := b.l.get(peer)
	b.mu.Unlock()
	return l.AllowN(now, 1)
}
