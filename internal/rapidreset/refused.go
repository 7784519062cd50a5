package rapidreset

import (
	"context"
	"sync/atomic"
)

// A request refused past its caller's rate of refusals (package server's
// admission: RESOURCE_EXHAUSTED, 429, past
// server.AdmissionRefusalsPerSecond) counts as an early reset, whatever
// the protocol: a caller whose calls are refused faster than any client
// that backs off makes them is paying the daemon to read, authenticate,
// decode and refuse requests, each costing more than the client's send
// (the sixteenth hostile pass: HTTP/1.1 pipelined Routes, mostly refused
// 429, took another identity's p99 from 10 to 232 ms). On HTTP/1.1, where
// a connection carries one request at a time unless pipelined, the
// refusal's answer also says Connection: close and the connection is
// closed after it, with whatever the client had pipelined behind it; on
// HTTP/2 and gRPC the rule closes the connection once such refusals are
// EarlyResetsMin and most of its requests. A client refused at the rate
// it backs off (a few a second) is never past it.

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
// rate: it counts as an early reset when it ends, and on HTTP/1.1 its
// connection is closed after the answer. It reports whether ctx carried
// a mark (a request of a listener that counts no resets carries none).
func RefusedPastRate(ctx context.Context) bool {
	r, ok := ctx.Value(refusedKey{}).(*refusal)
	if ok {
		r.past.Store(true)
	}
	return ok
}
