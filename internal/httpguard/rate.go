package httpguard

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An MCP listener's requests (POSTs: a JSON-RPC request, a notification,
// or a batch; GETs, the event stream; DELETEs, a session's end; any other
// method) are held to a rate per caller (the identity, or the peer host
// when anonymous: bodyOwner) at the guard, after authentication and
// before a byte of the body is read, so before the MCP SDK reads and
// decodes it. The eighteenth hostile pass: one identity's tools/list
// (or ping) flood over keep-alive HTTP/1.1 cost the proxy about 5 times
// the flooder's client CPU, most of it outside any admission (the SDK's
// reading and decoding, its answer, the GC), and another identity's p99
// doubled; the admission holds the flooder to its share of the cores but
// cannot see the work before and around it.
//
// The defaults are far above an honest agent: one opens its session
// with initialize, notifications/initialized and tools/list, and the Go
// SDK's client opens its event stream (a GET), then calls tools as fast
// as its model decides, a few a second, and ends with a DELETE; a burst
// of many parallel tool calls at start, or a hub opening a hundred
// sessions under one identity (four requests each), fits in the burst.
// A tools/list costs the proxy 0.6-0.7 ms of CPU: 100 a second is under
// a tenth of a core, where the flood answered 1,000-1,250 a second.
//
// GETs and DELETEs were not counted until the nineteenth hostile pass:
// one token's GETs (or DELETEs) of an unknown session on a kept-alive
// connection were answered 404 by the SDK at 1.5 times the flooder's
// CPU, never refused nor closed. They count one each, and the burst grew
// from 400 to 500 with the hub's fourth request (its event stream).
const (
	DefaultMCPRequestsPerSecond = 100
	DefaultMCPRequestBurst      = 500
	// maxRateBuckets bounds the callers whose rates are kept; past it
	// they all start afresh (each with its burst).
	maxRateBuckets = 4096
)

// RequestRate is each caller's rate of requests (Guard.Rate). The zero
// of a *RequestRate (nil) holds no one back.
type RequestRate struct {
	perSecond float64
	burst     int

	mu sync.Mutex
	by map[string]*rate.Limiter

	refused atomic.Int64
}

// NewRequestRate allows each caller perSecond requests a second after a
// burst of burst; perSecond <= 0: no bound (nil).
func NewRequestRate(perSecond float64, burst int) *RequestRate {
	if perSecond <= 0 {
		return nil
	}
	return &RequestRate{perSecond: perSecond, burst: max(burst, 1), by: map[string]*rate.Limiter{}}
}

// Allow takes a request of who's rate now, and counts a refusal when
// there is no room for it.
func (q *RequestRate) Allow(who string) bool { return q.allow(who, 1) }

// allow takes n requests of who's rate now, and counts a refusal when
// there is no room for them.
func (q *RequestRate) allow(who string, n int) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	if len(q.by) >= maxRateBuckets {
		q.by = map[string]*rate.Limiter{}
	}
	l := q.by[who]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(q.perSecond), q.burst)
		q.by[who] = l
	}
	ok := l.AllowN(time.Now(), n)
	q.mu.Unlock()
	if !ok {
		q.refused.Add(1)
	}
	return ok
}

// Refused is how many requests were refused past their caller's rate.
func (q *RequestRate) Refused() int64 {
	if q == nil {
		return 0
	}
	return q.refused.Load()
}

// errRequestRate is a request refused past its caller's rate: 429 with
// a JSON-RPC error RESOURCE_EXHAUSTED (CodeResourceExhausted) under the
// request's id.
type errRequestRate struct{ error }

func (q *RequestRate) refusal() error {
	return errRequestRate{status.Errorf(codes.ResourceExhausted,
		"more than %g MCP requests a second (after a burst of %d) from this caller: retry later, or raise --mcp-requests-per-second", q.perSecond, q.burst)}
}

// GRPCStatus lets status.FromError (mcpserver.ToolError) read the
// refusal's status through the wrapper.
func (e errRequestRate) GRPCStatus() *status.Status { return status.Convert(e.error) }
