package server

import (
	"context"
	"net"
	"time"

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

// A caller refused past its rates of bytes may go on sending: the
// twenty-eighth hostile pass's token had 17,000 calls a second refused
// at their headers over 64 connections and sent each call's 48 KiB of
// DATA all the same (grpc-go reads and drops what comes on a stream it
// has refused): 1.66 times the client's CPU, another identity's Route
// p50 1.4 -> 4.2 ms. Closing such a connection was tried twice and
// undone: as early resets (8707b25) the refusals penalized the loopback
// peer, every local client's new connections held (the twenty-ninth
// pass); closed at its 8th such refusal (7f55651), a gateway that
// forwards several users' calls over one channel lost the other users'
// calls in flight when one of them passed its rate (the thirtieth: 141
// of 190 of another identity's Routes UNAVAILABLE), and the victim's p50
// was no better (4.6-5.1 ms: each reconnection's handshake costs what
// the dropped bodies did). The DATA that no call reads is now paid for
// at its peer's rate (rapidreset.Streams, frames.go): the flood's reads
// wait, other connections go on.

// bodyTap refuses, after next, a call whose caller is past its rate of
// request bytes or of refused bodies.
func (e Edge) bodyTap(next tap.ServerInHandle) tap.ServerInHandle {
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
				return ctx, status.Errorf(codes.ResourceExhausted,
					"this caller's request messages (or those refused INVALID_ARGUMENT) passed their rate of bytes, or their share of all callers': retry after %.1f s", wait.Seconds())
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
