package httpguard

import (
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Each caller's request bodies that were read and then refused for the
// caller's fault (a 400, 413, 415 or 422 once the body was read: JSON
// that does not parse, a message the API refuses) are held to a rate of
// bytes: past it, the caller's next requests with a body are refused 429
// from their heads, before a byte of the body is read, until the rate
// has room again. The twenty-fourth hostile pass sent, with a token,
// Routes of 70 KB whose JSON string never ends: each body was read
// whole, scanned and decoded before its 400, none of it counted by any
// budget (a body a handler reads is free of the HTTP/2 frame budget, and
// a refusal runs no model, so admission never sees it), and the daemon
// spent 3.0-3.7 times the client's CPU, 18,879 of them in 10 s. An
// honest client's bodies parse; one whose bodies are all refused learns
// that from the first 400, and is then held to
// DefaultRefusedBodyBytesPerSecond of them.
const (
	DefaultRefusedBodyBytesPerSecond = 1 << 20
	DefaultRefusedBodyBurst          = 8 << 20
	// refusedUnit is the unit the rate counts in; each refused request
	// is charged one more, whatever its body's size.
	refusedUnit = 1 << 10
)

// RefusedBodies is each caller's rate of refused body bytes
// (Guard.BadBodies). Its nil value holds no one back.
type RefusedBodies struct {
	perSecond, burst int64 // in refusedUnit
	// all: every body read is charged (NewBodyRate), not only those
	// refused.
	all bool

	mu sync.Mutex
	by map[string]*rate.Limiter

	refused atomic.Int64
}

// NewRefusedBodies allows each caller bytesPerSecond of refused bodies
// after a burst of burst bytes; bytesPerSecond <= 0: no bound (nil).
func NewRefusedBodies(bytesPerSecond, burst int64) *RefusedBodies {
	if bytesPerSecond <= 0 {
		return nil
	}
	return &RefusedBodies{perSecond: max(bytesPerSecond/refusedUnit, 1), burst: max(burst/refusedUnit, 1),
		by: map[string]*rate.Limiter{}}
}

func (q *RefusedBodies) limiter(who string) *rate.Limiter {
	if len(q.by) >= maxRateBuckets {
		q.by = map[string]*rate.Limiter{}
	}
	l := q.by[who]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(q.perSecond), int(q.burst))
		q.by[who] = l
	}
	return l
}

// Past reports how long until who's rate has room again: 0 when it has
// (a request of who may send a body); a refusal is counted otherwise.
// The HTTP guards ask it at a request's head, the gRPC listener at a
// call's headers (server.ByteRate).
func (q *RefusedBodies) Past(who string) time.Duration {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	tokens := q.limiter(who).Tokens()
	q.mu.Unlock()
	if tokens >= 0 {
		return 0
	}
	q.refused.Add(1)
	return time.Duration(-tokens / float64(q.perSecond) * float64(time.Second))
}

// Charge counts n bytes of a body of who's (that was refused, for the
// rate of refused bodies).
func (q *RefusedBodies) Charge(who string, n int64) {
	if q == nil {
		return
	}
	units := min(n/refusedUnit+1, q.burst)
	q.mu.Lock()
	q.limiter(who).ReserveN(time.Now(), int(units)) // taken now: the tokens go below 0 (past)
	q.mu.Unlock()
}

// Refused is how many requests were refused past their caller's rate
// of refused bodies.
func (q *RefusedBodies) Refused() int64 {
	if q == nil {
		return 0
	}
	return q.refused.Load()
}

func (q *RefusedBodies) refusal(wait time.Duration) error {
	if q.all {
		return errRequestRate{status.Errorf(codes.ResourceExhausted,
			"this caller sent more than %d KiB of request bodies a second, after %d KiB (--body-bytes-per-second): retry after %.1f s",
			q.perSecond, q.burst, wait.Seconds())}
	}
	return errRequestRate{status.Errorf(codes.ResourceExhausted,
		"this caller's request bodies were refused (400, 413, 415, 422) more than %d KiB a second, after %d KiB: fix the requests, and retry after %.1f s",
		q.perSecond, q.burst, wait.Seconds())}
}

// Each caller's request bodies, whatever their answer, are held to a
// rate of bytes as well (NewBodyRate), far above what the model can use:
// reading, scanning and decoding a body costs the daemon about a
// microsecond per 100 bytes wherever it goes, and a call that runs no
// model (GetIndexInfo) padded to 64 KiB with a field the API does not
// have was answered 19,618 times in 10 s, the daemon at 6.5 times the
// client's CPU (the twenty-fifth hostile pass). An Embed of 16 texts
// of 250 KB (4 MiB, of which the model reads 16 x 128 tokens) takes the
// model some 100-200 ms on two cores: 16 MiB a second is four of them
// (the coordinator's re-run of that probe: 6.5 -> 2.2 times, the daemon
// 0.36 of a core).
const (
	DefaultBodyBytesPerSecond = 16 << 20
	DefaultBodyBurst          = 64 << 20
)

// NewBodyRate allows each caller bytesPerSecond of request bodies after
// a burst of burst bytes; bytesPerSecond <= 0: no bound (nil).
func NewBodyRate(bytesPerSecond, burst int64) *RefusedBodies {
	q := NewRefusedBodies(bytesPerSecond, burst)
	if q != nil {
		q.all = true
	}
	return q
}

// bodyFault reports whether an answer of status code and header h
// refuses a request for its body: the statuses a read body can earn for
// its caller's fault, or a gRPC or gRPC-Web answer (HTTP 200) whose
// status is INVALID_ARGUMENT, in its headers or trailers (the
// twenty-fifth hostile pass: gRPC-Web bodies refused so were never
// charged, 6-8 times the client's CPU).
func bodyFault(code int, h http.Header) bool {
	switch code {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	case http.StatusOK:
		const invalid = "3" // codes.InvalidArgument
		return h.Get("Grpc-Status") == invalid || h.Get(http.TrailerPrefix+"Grpc-Status") == invalid
	}
	return false
}

// retryAfter is d in whole seconds, at least 1, for Retry-After.
func retryAfter(d time.Duration) int64 { return max(int64(math.Ceil(d.Seconds())), 1) }

// byteCounter counts the bytes read through it.
type byteCounter struct {
	r io.Reader
	n int64
}

func (b *byteCounter) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}
