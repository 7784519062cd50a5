package httpguard

import (
	"cmp"
	"io"
	"math"
	"net/http"
	"slices"
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
	by map[string]*callerBytes

	// shared, if set (NewBodyRate's allPerSecond), holds every caller's
	// bodies together: while it is past, a caller sending more than its
	// fair share of it (fairShare) is refused as if past its own rate.
	shared         *rate.Limiter
	sharedPerSec   float64 // in refusedUnit
	sharedCarry    float64 // a unit's part charged, not yet taken from shared
	share          float64 // fairShare's last answer, in refusedUnit a second for a weight of 1
	shareAt        time.Time
	weight         func(who string) float64 // Weigh's; nil: 1 each
	refused        atomic.Int64
	refusedByShare atomic.Int64
}

// callerBytes is one caller's rate and how much it sent lately: recent
// units a second, decayed with a time constant of recentWindow since at.
type callerBytes struct {
	l      *rate.Limiter
	recent float64
	at     time.Time
}

// recentWindow is the time constant of a caller's recent rate of body
// bytes (callerBytes.recent), and shareEvery how often the fair share of
// the shared rate is worked out again while it is past.
const (
	recentWindow = time.Second
	shareEvery   = 50 * time.Millisecond
)

// recentAt is c's recent rate at now.
func (c *callerBytes) recentAt(now time.Time) float64 {
	dt := now.Sub(c.at)
	if dt <= 0 {
		return c.recent
	}
	return c.recent * math.Exp(-float64(dt)/float64(recentWindow))
}

// NewRefusedBodies allows each caller bytesPerSecond of refused bodies
// after a burst of burst bytes; bytesPerSecond <= 0: no bound (nil).
func NewRefusedBodies(bytesPerSecond, burst int64) *RefusedBodies {
	if bytesPerSecond <= 0 {
		return nil
	}
	return &RefusedBodies{perSecond: max(bytesPerSecond/refusedUnit, 1), burst: max(burst/refusedUnit, 1),
		by: map[string]*callerBytes{}}
}

func (q *RefusedBodies) caller(who string) *callerBytes {
	if len(q.by) >= maxRateBuckets {
		q.by = map[string]*callerBytes{}
	}
	c := q.by[who]
	if c == nil {
		c = &callerBytes{l: rate.NewLimiter(rate.Limit(q.perSecond), int(q.burst))}
		q.by[who] = c
	}
	return c
}

// Weigh sets each caller's weight in the shares of the shared rate (by
// its key, server.CallerKey; at most 1,000 times another's): a caller of
// weight 2 may send twice what one of weight 1 does when the rate is
// past. Called before serving.
func (q *RefusedBodies) Weigh(weight func(who string) float64) {
	if q != nil {
		q.weight = weight
	}
}

// weightOf is who's weight, 1 when unset or not positive.
func (q *RefusedBodies) weightOf(who string) float64 {
	if q.weight == nil {
		return 1
	}
	if w := q.weight(who); w > 0 {
		return min(w, 1000)
	}
	return 1
}

// fairShare is the weighted max-min fair share of the shared rate among
// the callers' recent rates at now, for a weight of 1: the rate f such
// that the callers' rates, each cut to its weight times f, add up to the
// shared rate (callers sending less keep theirs, those sending more share
// what is left by weight); with room for every caller, the shared rate
// over the weights of the callers sending at least a unit a second. q.mu
// is held.
func (q *RefusedBodies) fairShare(now time.Time) float64 {
	if now.Sub(q.shareAt) < shareEvery && !q.shareAt.IsZero() {
		return q.share
	}
	type flow struct{ r, w float64 }
	flows := make([]flow, 0, len(q.by))
	weights := 0.0
	for who, c := range q.by {
		if r := c.recentAt(now); r >= 1 {
			w := q.weightOf(who)
			flows = append(flows, flow{r, w})
			weights += w
		}
	}
	slices.SortFunc(flows, func(a, b flow) int { return cmp.Compare(a.r/a.w, b.r/b.w) })
	left, f := q.sharedPerSec, q.sharedPerSec
	if weights > 0 {
		f = q.sharedPerSec / weights
	}
	for _, fl := range flows {
		each := left / weights
		if fl.r/fl.w > each {
			f = each
			break
		}
		left -= fl.r
		weights -= fl.w
	}
	q.share, q.shareAt = f, now
	return f
}

// Past reports how long until who's rate has room again: 0 when it has
// (a request of who may send a body); a refusal is counted otherwise.
// The HTTP guards ask it at a request's head, the gRPC listener at a
// call's headers (server.ByteRate).
func (q *RefusedBodies) Past(who string) time.Duration {
	wait, _ := q.past(who)
	return wait
}

// past is Past, and whether the refusal is for who's share of the
// shared rate.
func (q *RefusedBodies) past(who string) (time.Duration, bool) {
	if q == nil {
		return 0, false
	}
	now := time.Now()
	q.mu.Lock()
	c := q.caller(who)
	tokens := c.l.TokensAt(now)
	var shared float64
	if tokens >= 0 && q.shared != nil {
		if shared = q.shared.TokensAt(now); shared < 0 && c.recentAt(now) <= q.weightOf(who)*q.fairShare(now) {
			shared = 0
		}
	}
	q.mu.Unlock()
	switch {
	case tokens < 0:
		q.refused.Add(1)
		return time.Duration(-tokens / float64(q.perSecond) * float64(time.Second)), false
	case shared < 0:
		q.refused.Add(1)
		q.refusedByShare.Add(1)
		return time.Duration(-shared / q.sharedPerSec * float64(time.Second)), true
	}
	return 0, false
}

// Charge counts n bytes of a body of who's (that was refused, for the
// rate of refused bodies).
func (q *RefusedBodies) Charge(who string, n int64) {
	if q == nil {
		return
	}
	units := min(n/refusedUnit+1, q.burst)
	now := time.Now()
	q.mu.Lock()
	c := q.caller(who)
	c.l.ReserveN(now, int(units)) // taken now: the tokens go below 0 (past)
	if q.shared != nil {
		// The shared rate and the share count bytes alone, not a unit
		// more a request as a caller's own rate does: counted so, 6,000
		// small Routes a second were 6 MiB a second, above their share
		// beside 24 tokens sending padding, and refused (the
		// twenty-ninth hostile pass).
		// Whole units are taken, the rest carried to the next body: rounded
		// down, bodies under a KiB charged the shared rate nothing (the
		// thirtieth hostile pass).
		kib := float64(n) / refusedUnit
		whole := math.Floor(q.sharedCarry + min(kib, float64(2*q.burst)))
		q.sharedCarry += min(kib, float64(2*q.burst)) - whole
		q.shared.ReserveN(now, int(whole))
		c.recent, c.at = c.recentAt(now)+kib/recentWindow.Seconds(), now
	}
	q.mu.Unlock()
}

// RefusedByShare is how many of the requests Refused counts were
// refused past their caller's share of the shared rate (NewBodyRate).
func (q *RefusedBodies) RefusedByShare() int64 {
	if q == nil {
		return 0
	}
	return q.refusedByShare.Load()
}

// Refused is how many requests were refused past their caller's rate
// of refused bodies.
func (q *RefusedBodies) Refused() int64 {
	if q == nil {
		return 0
	}
	return q.refused.Load()
}

func (q *RefusedBodies) refusal(wait time.Duration, byShare bool) error {
	if byShare {
		return errRequestRate{status.Errorf(codes.ResourceExhausted,
			"the daemon's callers together sent more than %d KiB of request bodies a second (--all-body-bytes-per-second), and this caller more than its share of it: retry after %.1f s",
			int64(q.sharedPerSec), wait.Seconds())}
	}
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

// The callers' bodies are held together as well, so that many
// identities each within its rate cannot take the cores between them:
// the twenty-seventh hostile pass's eight tokens sending padded 64 KiB
// calls, each under its 16 MiB a second, kept the daemon's two cores busy
// (2.4 times their CPU), and another identity's 2,000 small Routes took
// 6.2 s instead of 0.5. Past the shared rate, a caller is refused only if
// it sends more than its max-min fair share of it lately (fairShare): a
// caller of small requests is never held back by others' bulk, and the
// bulk callers share what is left. 32 MiB a second is two callers at
// their own rate, some 0.7 of a core of padding on the 2-core machine.
const DefaultAllBodyBytesPerSecond = 32 << 20

// NewBodyRate allows each caller bytesPerSecond of request bodies after
// a burst of burst bytes, and, with allPerSecond > 0, all callers
// together allPerSecond after twice burst, each caller past that held to
// its fair share of it; bytesPerSecond <= 0: no bound (nil).
func NewBodyRate(bytesPerSecond, burst, allPerSecond int64) *RefusedBodies {
	q := NewRefusedBodies(bytesPerSecond, burst)
	if q != nil {
		q.all = true
		if allPerSecond > 0 {
			q.sharedPerSec = float64(max(allPerSecond/refusedUnit, 1))
			q.shared = rate.NewLimiter(rate.Limit(q.sharedPerSec), int(2*q.burst))
		}
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
