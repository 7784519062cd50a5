package rapidreset

import (
	"context"
	"net/http"
	"reflect"
	"sync"
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
// 2,000 clients). On HTTP/2 the answer's Connection: close has net/http
// send GOAWAY: the streams the client opened before it are answered,
// later ones refused, and the connection closed once they end (the
// twenty-first hostile pass sent MCP requests past a caller's rate over
// HTTP/2, 12,000 refusals a second on four connections never closed, at
// five times the client's CPU). On gRPC nothing is done with the mark:
// admission refuses there at the stream's headers.

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

// The MCP SDK runs each request on a context of its session's, not the
// HTTP request's, so a refusal past the rate there marked nothing and no
// MCP connection was ever closed for it (the seventeenth hostile pass:
// pipelined tools/list, 5,478 of them refused in 15 s, none closed). The
// SDK hands each request the HTTP request's header map (its
// mcp.RequestExtra.Header), the one thing both sides hold: HeaderMarks
// registers the HTTP request's mark under that map while its handler
// runs, and FromHeader finds it again from the SDK's side. A mark is the
// request's own, so only the connection that carried the refused request
// is touched (an identity's mark would close its other connections, and
// a gateway's other callers' with them).

// headerMarks holds the mark of each HTTP request whose handler
// HeaderMarks runs, by its header map's pointer (the map stays alive,
// and so its pointer unique, while it is a key here).
var headerMarks sync.Map // unsafe.Pointer → *refusal

// HeaderMarks has each request's mark (WithRequest: Peers.Serve gives
// every request one) found by FromHeader with the request's header map,
// while next serves the request. A request without a mark, or without a
// header map, is served as is. Wrap the handler that reads the request
// itself (the SDK's): a request cloned in between has another map.
func HeaderMarks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r, ok := req.Context().Value(refusedKey{}).(*refusal)
		if !ok || req.Header == nil {
			next.ServeHTTP(w, req)
			return
		}
		k := reflect.ValueOf(req.Header).UnsafePointer()
		headerMarks.Store(k, r)
		defer headerMarks.CompareAndDelete(k, r)
		next.ServeHTTP(w, req)
	})
}

// FromHeader returns ctx carrying the mark of the HTTP request whose
// header map is h, if HeaderMarks is serving it, so that RefusedPastRate
// on it marks that request (on HTTP/1.1 its answer then closes its
// connection). Otherwise (stdio, a request whose HTTP handler has
// returned) it returns ctx.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	if h == nil {
		return ctx
	}
	if r, ok := headerMarks.Load(reflect.ValueOf(h).UnsafePointer()); ok {
		return context.WithValue(ctx, refusedKey{}, r)
	}
	return ctx
}
