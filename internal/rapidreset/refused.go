package rapidreset

import (
	"context"
	"sync/atomic"
)

// A request refused past its caller's rate of refusals (package
// server's admission: RESOURCE_EXHAUSTED, 429, past
// server.AdmissionRefusalsPerSecond) has, on HTTP/1.1, its answer say
// Connection: close: the connection is closed after it, with whatever
// the client had pipelined behind it (the sixteenth hostile pass:
// HTTP/1.1 pipelined Routes, mostly refused 429, took another identity's
// p99 from 10 to 232 ms). An honest client pays a reconnection, and no
// other connection is touched. Such a refusal is not an early reset (it
// was, in the seventeenth pass's fix): a hub of hundreds of callers
// behind one identity and one address, each backing off as told, is
// refused faster than that under overload, and the early-reset rule's
// penalty of the peer (its connections closed, its new ones at 2 a
// second) disconnected it (make loadtest: Unavailable at 1,000 and
// 2,000 clients). On gRPC and HTTP/2 nothing is done with the mark:
// admission refuses there before the message is read or transcoded.

type refusedKey struct{}

// refusal is one request's mark (WithRequest).
type refusal struct{ past atomic.Bool }

// WithRequest returns ctx carrying a mark for RefusedPastRate, and the
// func that reports whether the request was marked.
func WithRequest(ctx context.Context) (context.Context, func() bool) {
	r := &refusal{}
	return context.WithValue(ctx, refusedKey{}, r), r.past.Load
}

// RefusedPastRate marks the request of ctx as refused past its caller's
// rate: on HTTP/1.1 its connection is closed after the answer. It reports whether ctx carried
// a mark (a request of a listener that counts no resets carries none).
func RefusedPastRate(ctx context.Context) bool {
	r, ok := ctx.Value(refusedKey{}).(*refusal)
	if ok {
		r.past.Store(true)
	}
	return ok
}
