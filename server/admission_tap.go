package server

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"
)

// connArrivalKey marks a call's context with when its headers arrived on
// the connection (Admission.tap): the dispatch delay, from then to the
// call's goroutine starting, teaches the return-trip margin (tripModel).
type connArrivalKey struct{}

// tapCallerKey carries the caller the authentication tap found to the
// admission tap, so a token is looked up once per call in the tap.
type tapCallerKey struct{}

// tap is the admission's part of the gRPC server's tap (grpc.InTapHandle),
// which runs on the connection's reader goroutine as soon as a call's
// headers arrive, before grpc-go starts a goroutine for the call or reads
// its message. after runs first (the authentication tap, or nil), so a
// caller without a valid token is told UNAUTHENTICATED, never
// RESOURCE_EXHAUSTED; who is the caller of a call after has let through.
//
// It stamps the call with its arrival, and refuses a model call at once
// when even the cheapest call of its caller would be refused now
// (precheck): the refusal is then written by the connection's writer
// without the call's goroutine, message read, decoding or interceptors,
// each of which waits for a Go processor behind the model's Go work on a
// saturated daemon (docs/loadtest.md, "Seventh pass"). The interceptor
// still decides every call that gets through, with its request's size.
// A refusal here carries its retry delay in the status details
// (RetryInfo) but not in a grpc-retry-pushback-ms trailer: a
// trailers-only early answer has no trailers of its own.
//
// The cheap calls of our services (AdmitCPU's: GetIndexInfo, sessions,
// ListTools, WatchExposure's setup, ...) are prechecked here too, as
// AdmitCPU would decide them now: in the seventeenth hostile pass one
// identity's flood of them, mostly refused after their message was read
// and decoded, cost the daemon about 3 times its client's CPU, and was
// contained only by closing its connections for refusals past a rate,
// a rule that also disconnected an honest hub of thousands of callers
// backing off as told (make loadtest: Unavailable at 1,000 and 2,000
// clients). Refused here a call costs the daemon microseconds on the
// connection's reader, so its refusals need no penalty at all
// (admission_refusals.go).
func (a *Admission) tap(after tap.ServerInHandle, who func(context.Context, *tap.Info) Caller) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if after != nil {
			var err error
			if ctx, err = after(ctx, info); err != nil {
				return ctx, err
			}
		}
		now := a.now()
		ctx = context.WithValue(ctx, connArrivalKey{}, now)
		cpu := !admittedMethods[info.FullMethodName]
		if cpu && !tapCPUMethod(info.FullMethodName) {
			return ctx, nil
		}
		c := who(ctx, info)
		if err := a.setupRefused(ctx, c, info.FullMethodName, now, true); err != nil {
			return ctx, err
		}
		if err := a.precheck(ctx, c, tapAttempts(info.Header), now, cpu); err != nil {
			a.rejected(info.FullMethodName)
			return ctx, err
		}
		return ctx, nil
	}
}

// tapCPUMethod reports whether the tap prechecks method as one of
// AdmitCPU's calls: a method of our own services (the health checks and
// reflection are not; they have their own bounds) that runs no model.
func tapCPUMethod(method string) bool {
	return strings.HasPrefix(method, "/classifier.v1.") || strings.HasPrefix(method, "/terminal.v1.")
}

// tapAttempts is the grpc-previous-rpc-attempts of a call's headers,
// capped.
func tapAttempts(md metadata.MD) int {
	return previousAttempts(metadata.NewIncomingContext(context.Background(), md))
}

// precheck returns the refusal admit would give now to the cheapest call
// of caller c with the given attempts and ctx's deadline (for its
// deadline, the overload's wait bound, or a full queue none of whose
// calls would give way to it), or nil; with cpu, to one of AdmitCPU's
// calls (a request of no size, holding a core while the cores are
// shared). It leaves the scheduler as it found it (but for forgetting the flows idle
// past ActiveFor, as any call does). It never waits for the scheduler's
// lock: it runs on a connection's reader goroutine, which every call of
// the connection waits for, so when the lock is taken the call goes on
// and the interceptor decides it (a trace of short2000 with a waiting
// lock here: the readers spent 27% of their scheduling delay handing
// the lock on).
func (a *Admission) precheck(ctx context.Context, c Caller, attempts int, now time.Time, cpu bool) error {
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < a.cfg.MinDeadline {
		return nil // the interceptor's DEADLINE_EXCEEDED, as before
	}
	if !a.mu.TryLock() {
		return nil
	}
	defer a.mu.Unlock()
	if a.forgetLocked(now) {
		a.dispatchLocked(now)
	}
	key, weight := a.flowOf(c)
	f := a.flows[key]
	restore := func() {}
	switch {
	case f == nil:
		f = &flow{key: key, weight: weight, vtime: a.vnow}
		a.flows[key] = f
		restore = func() { delete(a.flows, key) }
	case !f.busy():
		v, w := f.vtime, f.weight
		f.vtime, f.weight = max(f.vtime, a.vnow), weight
		restore = func() { f.vtime, f.weight = v, w }
	}
	s := a.sharesLocked()
	cost, long := a.cost.cheapest(), false
	if cpu {
		cost = a.cost.predict(0)
		long = a.holdsCoreLocked(cost, true)
	}
	if f.queued == 0 && a.mayStartLocked(f, s, long) {
		restore()
		return nil
	}
	within := a.withinShareLocked(f, s, long)
	first := f.queued == 0 && within
	wait := a.expectedWaitLocked(f, attempts, long, first, now)
	why, after := a.refuseLocked(ctx, now, wait, time.Duration(cost), first, within)
	if why == "" && a.fullLocked(0) && a.pushOutVictimLocked(f, 0, attempts) == nil {
		// The queue is full and none of its calls would give way to
		// this one (admit's push-out): its caller's own calls fill it.
		why, after = a.fullWhyLocked(), wait
	}
	restore()
	if why == "" {
		return nil
	}
	if first { // as admit: the next place that comes free is kept for it
		f, _ = a.flowLocked(key, weight)
		if a.idleLocked(f, now) {
			a.dispatchLocked(now)
		}
	}
	a.pastRate(ctx, a.refusedLocked(key, now))
	return refusal(why, after)
}

// tripModel learns the margin a call's answer needs, after the call ends
// in the daemon, to reach its caller before the caller's deadline: twice
// a high quantile (tripQuantile) of the recent calls' dispatch delays,
// from their headers' arrival on the connection (the tap) to their
// goroutine starting (the admission's stats handler, before the message
// is read, so a client that sends its message slowly teaches it nothing).
// The dispatch delay is one crossing of the daemon's runtime on the way
// in, waiting for a Go processor when the cores are busy; the answer's
// way back crosses as many (the connection's writer goroutine, the
// socket, the client's reader and the caller's goroutines), and the
// client's half of the way in is not in the daemon's deadline at all
// (grpc-timeout is relative: the deadline starts when the daemon reads
// the headers), hence twice. It is learnt, not set: near zero on an idle
// daemon, where it would only refuse calls, tens of milliseconds on a
// saturated one, where the sixth pass's calls ended in the daemon within
// 48 ms of their 50 ms deadlines and reached their clients at 124 ms p99.
// It has its own lock, off the scheduler's.
//
// It is learnt from recent calls only: a delay arriving tripStale or more
// after the one before starts the samples afresh, and the margin halves
// for each tripStale past the first without a call (the sixth hostile pass: the margin a
// burst taught stayed at an idle daemon until 32 new calls had come, and
// refused their short deadlines meanwhile). (Within tripStale of a call
// it stands: the gaps between calls at a busy daemon do not wear it.)
type tripModel struct {
	mu     sync.Mutex
	ring   [tripSamples]time.Duration
	n      int          // delays observed
	margin atomic.Int64 // the current margin, in nanoseconds
	last   atomic.Int64 // when the latest delay was observed (Unix ns)
}

const (
	// tripSamples is how many recent dispatch delays the margin is
	// taken from.
	tripSamples = 256
	// tripEvery: the margin is recomputed every tripEvery delays (a
	// sort of tripSamples durations) once it has that many.
	tripEvery = 32
	// tripQuantile is the quantile of the dispatch delays taken.
	tripQuantile = 0.9
	// tripStale: delays older than this at the next one are forgotten,
	// and the margin halves for each tripStale, past the first, without
	// a call.
	tripStale = 10 * time.Second
)

// observe adds a call's dispatch delay d, observed at now.
// A delay that finds the lock taken is dropped: a sample, on every call's
// goroutine as it starts; waiting for the lock there made a convoy of
// them on a saturated daemon (docs/loadtest.md, "Eleventh pass").
func (m *tripModel) observe(d time.Duration, now time.Time) {
	if !m.mu.TryLock() {
		return
	}
	defer m.mu.Unlock()
	if last := m.last.Load(); m.n > 0 && now.UnixNano()-last >= int64(tripStale) {
		m.n = 0 // learnt from recent calls only
	}
	m.last.Store(now.UnixNano())
	m.ring[m.n%tripSamples] = max(d, 0)
	m.n++
	if m.n > tripEvery && m.n%tripEvery != 0 {
		return
	}
	k := min(m.n, tripSamples)
	q := slices.Clone(m.ring[:k])
	slices.Sort(q)
	m.margin.Store(int64(2 * q[int(tripQuantile*float64(k-1))]))
}

// get is the margin at now: the learnt one, halved for each tripStale
// past the first since the latest delay.
func (m *tripModel) get(now time.Time) time.Duration {
	margin := m.margin.Load()
	if margin == 0 {
		return 0
	}
	idle := now.UnixNano() - m.last.Load() - int64(tripStale)
	if idle <= 0 {
		return time.Duration(margin)
	}
	return time.Duration(float64(margin) * math.Exp2(-float64(idle)/float64(tripStale)))
}

// ReturnMargin is the learnt time kept free at the end of a call's own
// deadline for its answer to reach the caller (0 until calls have
// arrived through the gRPC server).
func (a *Admission) ReturnMargin() time.Duration { return a.trip.get(a.now()) }

// dispatchClock is the admission's gRPC stats handler: as a model call's
// goroutine starts (TagRPC runs on it, before its message is read), it
// teaches the trip model the call's dispatch delay from the tap's stamp.
type dispatchClock struct{ a *Admission }

func (d dispatchClock) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if at, ok := ctx.Value(connArrivalKey{}).(time.Time); ok && admittedMethods[info.FullMethodName] {
		now := d.a.now()
		d.a.trip.observe(now.Sub(at), now)
	}
	return ctx
}

func (dispatchClock) HandleRPC(context.Context, stats.RPCStats) {}

func (dispatchClock) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (dispatchClock) HandleConn(context.Context, stats.ConnStats) {}

// PrecheckHTTP is the tap's precheck for a request of --http-listen
// (whose calls reach the gRPC handlers through grpc.Server.ServeHTTP,
// where no tap runs): the refusal admission would give now to a call
// of method ("/pkg.Service/Method") by the caller the HTTP guard put in
// ctx, with timeout as the call's own deadline (0: none), or nil. The
// guard answers a refusal 429 at once, after the request's body but
// before vanguard transcodes it and the gRPC handler decodes it: the
// seventeenth hostile pass's flood of cheap calls over HTTP cost the
// daemon 13.3 s of CPU against its client's 7.8 s, mostly there. A
// method it does not know, or a request without an authenticated
// caller, is left to the interceptor (nil); so is any call the
// precheck cannot decide without waiting for the scheduler's lock. A
// nil Admission refuses nothing.
func (a *Admission) PrecheckHTTP(ctx context.Context, method string, timeout time.Duration) error {
	if a == nil {
		return nil
	}
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return nil
	}
	cpu := !admittedMethods[method]
	if cpu && !tapCPUMethod(method) {
		return nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := a.setupRefused(ctx, c, method, a.now(), false); err != nil {
		return err
	}
	err := a.precheck(ctx, c, 0, a.now(), cpu)
	if err != nil {
		a.rejected(method)
	}
	return err
}

// RetryAfter is the retry delay a refusal of admission carries (0: none).
func RetryAfter(err error) time.Duration { return retryAfter(err) }
