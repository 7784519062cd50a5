package server

import (
	"context"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// ByteRate is a rate of request bytes per caller, shared with the HTTP
// listeners (httpguard.RefusedBodies): Past reports how long until who's
// rate has room again (0: it has), Charge counts n bytes of who's. A nil
// *httpguard.RefusedBodies in it holds no one back.
type ByteRate interface {
	Past(who string) time.Duration
	Charge(who string, n int64)
}

// The gRPC listener's calls are held to the HTTP listeners' rates of
// request bytes (Edge.BodyRate, every message) and of refused bodies
// (Edge.BadBodies, a message refused INVALID_ARGUMENT), by the same
// caller keys: past either, a call is refused RESOURCE_EXHAUSTED as its
// headers arrive (bodyTap), before its message is read. The
// twenty-sixth and twenty-seventh hostile passes sent, on --listen,
// messages refused for what they held (3.2 times the client's CPU),
// cheap calls padded to 64 KiB (4.0 times) and unknown fields (12.3
// times; refused before decoding since, and then sent ten times as
// fast), none of it held by any rate.

// CallerKey is what the per-caller budgets and rates of every listener
// (httpguard's, bodyrate.go's) count a request under: its caller's
// identity, else the host of its peer's address remote ("host:port").
func CallerKey(c Caller, remote string) string {
	if c.Name != "" {
		return "id:" + c.Name
	}
	return PeerKey(remote)
}

// PeerKey is CallerKey's key of the peer address remote.
func PeerKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "peer:" + host
}

// bodyKey is CallerKey of a call's caller and peer.
func bodyKey(c Caller, p *peer.Peer) string {
	remote := ""
	if p != nil && p.Addr != nil {
		remote = p.Addr.String()
	}
	return CallerKey(c, remote)
}

// A caller refused past its rates of bytes goes on sending: the
// twenty-eighth hostile pass's token, past its rate, had 17,000 calls a
// second refused at their headers over 64 connections, and sent each
// call's 48 KiB of DATA all the same (grpc-go reads and drops what comes
// on a stream it has refused): 850 MB a second deciphered, 1.1 cores,
// another identity's Route p50 1.4 -> 3.8 ms. Nothing throttled it: a
// refusal at the tap is not the caller's fault as UNAUTHENTICATED is, so
// no early reset. Past BodyRefusalsPerSecond of such refusals a second
// (after BodyRefusalBurst), a connection that has BodyRefusalsPerConn of
// them is closed (refuseHeld): its client pays a new handshake for each
// few calls it sends to be refused. Its peer is not penalized: counted
// as early resets, they penalized the loopback peer, and every local
// client's new connections were held (the twenty-ninth pass). A client
// that waits as told (the refusal says how long) is refused a few times
// a second at most.
const (
	BodyRefusalsPerSecond = 20
	BodyRefusalBurst      = 64
	BodyRefusalsPerConn   = 8
)

// closingRefusal is a tap's refusal past the caller's rate of them,
// which refuseHeld counts toward closing its connection.
type closingRefusal struct{ s *status.Status }

func (e closingRefusal) Error() string              { return e.s.Err().Error() }
func (e closingRefusal) GRPCStatus() *status.Status { return e.s }

// bodyRefusals is each caller's rate of refusals for its rates of bytes.
type bodyRefusals struct {
	mu sync.Mutex
	by map[string]*rate.Limiter
}

// past counts a refusal of who's and reports whether it is past who's
// rate.
func (b *bodyRefusals) past(who string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.by) >= maxRefusalBuckets {
		b.by = map[string]*rate.Limiter{}
	}
	l := b.by[who]
	if l == nil {
		l = rate.NewLimiter(BodyRefusalsPerSecond, BodyRefusalBurst)
		b.by[who] = l
	}
	return !l.Allow()
}

// bodyTap refuses, after next, a call whose caller is past its rate of
// request bytes or of refused bodies; past its rate of such refusals
// too, toward closing its connection (closingRefusal).
func (e Edge) bodyTap(next tap.ServerInHandle) tap.ServerInHandle {
	refusals := &bodyRefusals{by: map[string]*rate.Limiter{}}
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if next != nil {
			var err error
			if ctx, err = next(ctx, info); err != nil {
				return ctx, err
			}
		}
		p, _ := peer.FromContext(ctx)
		who := bodyKey(e.Auth.tapCaller(ctx, info), p)
		for _, q := range []ByteRate{e.BadBodies, e.BodyRate} {
			if q == nil {
				continue
			}
			if wait := q.Past(who); wait > 0 {
				s := status.Newf(codes.ResourceExhausted,
					"this caller's request messages (or those refused INVALID_ARGUMENT) passed their rate of bytes, or their share of all callers': retry after %.1f s", wait.Seconds())
				if refusals.past(who) {
					return ctx, closingRefusal{s}
				}
				return ctx, s.Err()
			}
		}
		return ctx, nil
	}
}

// chargeBody counts a call's request message of n bytes (its wire size)
// to its caller's rates: every one to BodyRate, one refused
// INVALID_ARGUMENT (err) to BadBodies as well.
func (e Edge) chargeBody(ctx context.Context, n int, err error) {
	if n <= 0 || e.BodyRate == nil && e.BadBodies == nil {
		return
	}
	c, ok := ctx.Value(tapCallerKey{}).(Caller)
	if !ok {
		c = CallerFrom(ctx)
	}
	p, _ := peer.FromContext(ctx)
	who := bodyKey(c, p)
	if e.BodyRate != nil {
		e.BodyRate.Charge(who, int64(n))
	}
	if e.BadBodies != nil && status.Code(err) == codes.InvalidArgument {
		e.BadBodies.Charge(who, int64(n))
	}
}
