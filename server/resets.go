package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/internal/peerkey"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// EarlyResetsMin and the rule around it close a gRPC connection whose
// client cancels most of its calls before sending their message (an
// HTTP/2 "rapid reset": HEADERS then RST_STREAM, over and over). Each
// such call costs the daemon its headers' decoding, the taps, a handler
// goroutine and its teardown, and the client almost nothing: it reads no
// answer and never waits. In the eleventh hostile pass four connections
// with no token sent 46,000 health Checks a second that way: the daemon
// used 1.4 cores (the client 0.1), and another identity's small Route
// went from p50 1.7 ms to 244-359 ms (p99 1.1 s). A client that cancels
// calls after sending their message, or lets their deadline pass, is not
// counted: a gRPC client sends a unary call's message with its headers.
// A call refused at its headers because its caller already has
// MaxWaitingPerCaller calls waiting for their message counts as early
// too (a flood of such calls was refused one by one, cheaply, but never
// closed the connection). Once a connection has had EarlyResetsMin such
// calls (PenalizedEarlyResetsMin if its peer is penalized) and they are
// more than half of its calls, it is closed at once (what it had sent is
// refused, nothing more is read) and its peer is penalized.
const EarlyResetsMin = 64

// The early-reset rule per peer, across its connections: a client that
// sent 63 resets on a connection, closed it and opened another was never
// caught by the rule per connection (the twelfth hostile pass: 4
// connections, 50,000 resets a second over 1,000 new connections a
// second, the daemon 8-10 s of CPU in 10 s and another identity's Route
// p99 1.6-4.8 s). A peer is an IPv4 address or an IPv6 /64 (peerkey),
// except that every loopback address and a Unix socket are one peer,
// "local": the thirteenth hostile pass reset from 1,000 loopback
// addresses, each a peer under its share, and was never caught. Once a
// peer's calls within PeerResetWindow have had PeerEarlyResetsMin early
// resets and they are more than half of its calls (a client whose short
// deadlines expire before the daemon reads some messages is not a
// resetter), or one of its connections is caught, the peer is penalized
// for PeerResetPenalty: each of its connections is closed at its
// PenalizedEarlyResetsMin-th early reset (if most of its calls), and the
// gRPC listener serves at most PenalizedConnsPerSecond of its new
// connections a second (after a burst of PenalizedConnBurst), holding the
// others back unread, in order, before any HTTP/2 work (tarpit.go). The
// penalized peer's open connections whose calls carry their messages
// (another client behind the same address: a NAT, or another local
// agent) go on working; their new connections wait their turn.
const (
	PeerEarlyResetsMin       = 256
	PeerResetWindow          = 10 * time.Second
	PeerResetPenalty         = 30 * time.Second
	PenalizedEarlyResetsMin  = 8
	PenalizedConnsPerSecond  = 2
	PenalizedConnBurst       = 4
	maxResetPeers            = 1 << 16
	resetPeersSweepThreshold = 1 << 12
)

// localPeer is the one peer every loopback address and a Unix socket
// count as for the early-reset rule.
var localPeer = netip.IPv6Loopback()

// resetPeerOf is the peer a connection from addr counts as for the
// early-reset rule.
func resetPeerOf(addr net.Addr) netip.Addr {
	p, ok := peerkey.Remote(addr)
	if !ok || p.IsLoopback() {
		return localPeer
	}
	return p
}

// resetPeers counts the early resets of each peer in the current window
// and holds the penalized peers.
type resetPeers struct {
	mu        sync.Mutex
	m         map[netip.Addr]*peerResets
	lastSweep time.Time
	// now is time.Now; tests move it.
	now func() time.Time
	// penalized counts the peers penalized, refused the held connections
	// closed (the queue full, or held too long).
	penalized, refused atomic.Int64
	// onPenalty, if set, is told of each peer penalized (the log).
	onPenalty func(peer netip.Addr, resets, calls int64, until time.Time)
}

type peerResets struct {
	window       time.Time // when the current window started
	calls, early int64     // calls ended in it, and early resets
	until        time.Time // penalized until (zero: not)
	// The connections a penalized peer may still open: a token bucket.
	tokens float64
	last   time.Time
}

func newResetPeers() *resetPeers {
	return &resetPeers{m: map[netip.Addr]*peerResets{}, now: time.Now}
}

// entryLocked is peer's record, created if room is left; nil if not
// (the rule per connection still applies).
func (r *resetPeers) entryLocked(peer netip.Addr, now time.Time) *peerResets {
	if p, ok := r.m[peer]; ok {
		return p
	}
	if len(r.m) >= resetPeersSweepThreshold && now.Sub(r.lastSweep) >= PeerResetWindow {
		r.lastSweep = now
		for k, p := range r.m {
			if now.Sub(p.window) >= 2*PeerResetWindow && !now.Before(p.until) {
				delete(r.m, k)
			}
		}
	}
	if len(r.m) >= maxResetPeers {
		return nil
	}
	p := &peerResets{window: now}
	r.m[peer] = p
	return p
}

// ended counts a call of peer that ended, early or not, penalizes the
// peer past the rule (or at once when caught says one of its connections
// was), and reports whether it is penalized.
func (r *resetPeers) ended(peer netip.Addr, early, caught bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	p := r.entryLocked(peer, now)
	if p == nil {
		return false
	}
	if now.Sub(p.window) >= PeerResetWindow {
		p.window, p.calls, p.early = now, 0, 0
	}
	if !caught {
		p.calls++
		if early {
			p.early++
		}
	}
	if penalized := now.Before(p.until); !penalized && (caught || p.early >= PeerEarlyResetsMin && 2*p.early > p.calls) {
		p.until = now.Add(PeerResetPenalty)
		p.tokens, p.last = PenalizedConnBurst, now
		r.penalized.Add(1)
		if r.onPenalty != nil {
			r.onPenalty(peer, p.early, p.calls, p.until)
		}
		p.calls, p.early = 0, 0
	}
	return now.Before(p.until)
}

// admit reports whether a new connection of peer may be served now:
// always, unless the peer is penalized and has used its places for now
// (then the listener holds it back: tarpit.go).
func (r *resetPeers) admit(peer netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.m[peer]
	if !ok {
		return true
	}
	now := r.now()
	if !now.Before(p.until) {
		return true
	}
	p.tokens = min(PenalizedConnBurst, p.tokens+now.Sub(p.last).Seconds()*PenalizedConnsPerSecond)
	p.last = now
	if p.tokens < 1 {
		return false
	}
	p.tokens--
	return true
}

// giveBack returns a place admit took for peer.
func (r *resetPeers) giveBack(peer netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.m[peer]; ok && r.now().Before(p.until) {
		p.tokens = min(PenalizedConnBurst, p.tokens+1)
	}
}

// resetStats is the stats handler counting each connection's calls and
// its early resets, and each peer's (resetPeers).
type resetStats struct {
	closed *atomic.Int64
	peers  *resetPeers
}

type connResets struct {
	c            *recvConn
	peers        *resetPeers
	calls, early atomic.Int64
	closed       atomic.Bool
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

// PenalizedPeers is how many times a peer was penalized for its early
// resets (PeerEarlyResetsMin); PenalizedConnsRefused, how many new
// connections of penalized peers were closed unserved (tarpit.go).
func (g *RecvGuard) PenalizedPeers() int64 { return g.peers.penalized.Load() }

// PenalizedConnsRefused: see PenalizedPeers.
func (g *RecvGuard) PenalizedConnsRefused() int64 { return g.peers.refused.Load() }

// LogPenalties logs each peer penalized for its early resets. Set before
// serving.
func (g *RecvGuard) LogPenalties(log *slog.Logger) {
	g.peers.onPenalty = func(peer netip.Addr, resets, calls int64, until time.Time) {
		who := peer.String()
		if peer == localPeer {
			who = "local (loopback or Unix socket)"
		}
		log.Warn("a peer reset many gRPC calls before their message: its connections that do so are closed and its new ones limited",
			"peer", who, "early_resets", resets, "calls", calls, "within", PeerResetWindow.String(),
			"until", until.UTC().Format(time.RFC3339), "new_conns_per_second", PenalizedConnsPerSecond)
	}
}

func (r resetStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if a, ok := info.RemoteAddr.(recvAddr); ok {
		return context.WithValue(ctx, connResetsKey{}, &connResets{c: a.c, peers: r.peers})
	}
	return ctx
}

func (resetStats) HandleConn(context.Context, stats.ConnStats) {}

func (resetStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if ctx.Value(connResetsKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, callArrived{}, new(atomic.Bool))
}

func (r resetStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	arrived, ok := ctx.Value(callArrived{}).(*atomic.Bool)
	if !ok {
		return
	}
	switch s := s.(type) {
	case *stats.InPayload:
		arrived.Store(true)
	case *stats.End:
		// A call the body budget cut (errRecvBudget) ends CANCELLED before
		// its message too, but the daemon ended it, not its client: a
		// client uploading many large messages at once had its
		// connection closed as a rapid resetter (the twelfth hostile pass).
		r.ended(ctx, !arrived.Load() && status.Code(s.Error) == codes.Canceled && !errors.Is(context.Cause(ctx), errRecvBudget))
	}
}

// ended counts a call of ctx's connection and its peer, early or not,
// and closes the connection past the rule.
func (r resetStats) ended(ctx context.Context, early bool) {
	cr, ok := ctx.Value(connResetsKey{}).(*connResets)
	if !ok {
		return
	}
	calls := cr.calls.Add(1)
	n := cr.early.Load()
	if early {
		n = cr.early.Add(1)
	}
	least := int64(EarlyResetsMin)
	if cr.peers != nil && cr.peers.ended(cr.c.peer, early, false) {
		least = PenalizedEarlyResetsMin
	}
	if early && n >= least && 2*n > calls && cr.closed.CompareAndSwap(false, true) {
		r.closed.Add(1)
		cr.c.closeCaught()
		if cr.peers != nil {
			cr.peers.ended(cr.c.peer, false, true)
		}
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

// refuseHeld refuses at once, before any other tap, every call of a
// connection the early-reset rule caught: the calls it had sent before it
// was caught (up to a read buffer of them) otherwise each still took a
// handler.
func refuseHeld(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if c, ok := ctx.Value(recvConnKey{}).(*recvConn); ok && c.caught.Load() {
			return ctx, errHeld
		}
		return next(ctx, info)
	}
}
