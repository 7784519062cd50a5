package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

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
// MaxWaitingPerCaller calls waiting for their message counts as early too
// (a flood of such calls was refused one by one, cheaply, but never
// closed the connection). Once a connection has had EarlyResetsMin such calls and they are more
// than half of its calls, it is closed; its client must connect again
// (a TCP and HTTP/2 handshake, counted by --max-conns-per-peer) for every
// few hundred resets.
const EarlyResetsMin = 64

// EarlyResetHold is how long a connection caught by the early-reset rule
// is held, read no further, before it is closed: closed at once, its
// client connected again and reset as many more (four connections made
// 170 new ones a second, and the daemon spent more on them than before).
// Held, they count against --max-conns-per-peer and cost nothing.
const EarlyResetHold = 10 * time.Second

// resetStats is the stats handler counting each connection's calls and
// its early resets (ResetGuard).
type resetStats struct{ closed *atomic.Int64 }

type connResets struct {
	c            *recvConn
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
	return grpc.StatsHandler(resetStats{&g.resetCloses})
}

// EarlyResetCloses is how many connections were closed for resetting
// most of their calls before their message.
func (g *RecvGuard) EarlyResetCloses() int64 { return g.resetCloses.Load() }

func (r resetStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if a, ok := info.RemoteAddr.(recvAddr); ok {
		return context.WithValue(ctx, connResetsKey{}, &connResets{c: a.c})
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

// ended counts a call of ctx's connection, early or not, and closes the
// connection past the rule.
func (r resetStats) ended(ctx context.Context, early bool) {
	cr, ok := ctx.Value(connResetsKey{}).(*connResets)
	if !ok {
		return
	}
	calls := cr.calls.Add(1)
	if !early {
		return
	}
	if n := cr.early.Add(1); n >= EarlyResetsMin && 2*n > calls && cr.closed.CompareAndSwap(false, true) {
		r.closed.Add(1)
		cr.c.holdThenClose(EarlyResetHold)
	}
}

// holdThenClose stops c's reads for d, then closes it: what it had read is
// still served, nothing more.
func (c *recvConn) holdThenClose(d time.Duration) {
	c.holdUntil.Store(time.Now().Add(d).UnixNano())
}

// holding, when c is held, waits out the hold (or c's close), closes c and
// reports true.
func (c *recvConn) holding() bool {
	until := c.holdUntil.Load()
	if until == 0 {
		return false
	}
	time.Sleep(time.Until(time.Unix(0, until)))
	_ = c.Close()
	return true
}

// errHeld refuses the calls a held connection had already sent.
var errHeld = status.Error(codes.ResourceExhausted, "this connection reset too many calls before their message: it is closed")

// refuseHeld refuses at once, before any other tap, every call of a
// connection the early-reset rule holds: the calls it had sent before it
// was caught (up to a read buffer of them) otherwise each still took a
// handler.
func refuseHeld(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if c, ok := ctx.Value(recvConnKey{}).(*recvConn); ok && c.holdUntil.Load() != 0 {
			return ctx, errHeld
		}
		return next(ctx, info)
	}
}
