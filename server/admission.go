package server

import (
	"container/list"
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AdmissionConfig bounds the calls that run the model at once and the
// calls that may wait for one of those places. Calls past the bounds are
// refused at once with ResourceExhausted, so a saturated daemon answers
// in microseconds instead of queueing clients into their deadlines.
type AdmissionConfig struct {
	MaxInFlight int // model calls running at once (0: no admission control)
	MaxQueue    int // calls waiting for a place; more are refused
	// MaxWait, when positive, bounds the waiting in time as well as in
	// number while the daemon is overloaded: a call that finds every
	// place taken is then refused at once if it would wait longer than
	// this for one, estimated from the calls ahead of it and the recent
	// rate at which places came free to waiting calls. So admitted calls
	// wait about MaxWait at most on a machine of any speed and under any
	// other load, where MaxQueue alone makes them wait MaxQueue ÷ the
	// service rate. A call into an empty queue is always admitted.
	MaxWait time.Duration
	// The daemon is overloaded once calls have been waiting without a
	// break for StandingAfter (CoDel's interval: a queue that does not
	// drain), and stays so until the queue has been empty for IdleAfter.
	// Until then a burst into an idle daemon may queue up to StandingAfter
	// of expected waiting (a queue that drains within the interval is a
	// good queue); the long exit keeps the bound on between the herds of
	// refused clients that come back together after their backoff. Zero
	// StandingAfter: MaxWait applies whenever calls wait.
	StandingAfter, IdleAfter time.Duration
	// MinDeadline: a call with less time left than this is refused with
	// DeadlineExceeded before any work (it could not finish anyway).
	MinDeadline time.Duration
}

// DefaultAdmissionMaxWait is the default of AdmissionConfig.MaxWait
// (cmd/classifierd's --max-waiting-time). The 50 ms p99 target of
// docs/loadtest.md is for the whole call: at saturation the admitted
// calls' p99 was about 30 ms above their waiting bound (16 waiting calls,
// about 20 ms of waiting on a quiet 2-core machine, gave 52 ms), so the
// waiting gets 10 ms.
const DefaultAdmissionMaxWait = 10 * time.Millisecond

// Defaults of AdmissionConfig.StandingAfter and IdleAfter.
const (
	DefaultAdmissionStandingAfter = 100 * time.Millisecond
	DefaultAdmissionIdleAfter     = time.Second
)

// drainWeight is the weight of the newest interval in the mean interval
// between places coming free (about the last 20 intervals count).
const drainWeight = 0.05

// admittedMethods run the model; the rest (sessions, index info, stats,
// health) are cheap and never wait behind them.
var admittedMethods = map[string]bool{
	"/classifier.v1.ClassifierService/Classify":       true,
	"/classifier.v1.ClassifierService/Route":          true,
	"/classifier.v1.ClassifierService/Embed":          true,
	"/classifier.v1.ClassifierService/AnalyzePrompt":  true,
	"/classifier.v1.ClassifierService/DetectContexts": true,
	"/terminal.v1.TerminalService/DetectInputPrompt":  true,
	"/terminal.v1.TerminalService/InferExpectedInput": true,
}

// Admission is the bounded admission of model calls: MaxInFlight places,
// and a first-in first-out queue for them bounded in number (MaxQueue)
// and, while overloaded, in expected waiting time (MaxWait). A place that
// is given back goes straight to the oldest waiting call.
type Admission struct {
	cfg AdmissionConfig
	now func() time.Time

	mu       sync.Mutex
	inFlight int
	waiters  list.List // of *waiter, oldest first
	// drain is the weighted mean time, in nanoseconds, between places
	// coming free while calls wait (0 until one has): the queue's
	// service interval. lastFree is when a place last came free or the
	// queue last formed, whichever is later.
	drain    float64
	lastFree time.Time
	// busySince is when the queue last formed, idleSince when it last
	// emptied; overloadedLocked keeps overloaded from them.
	busySince, idleSince time.Time
	overloaded           bool

	// rejected counts a refusal; waited records how long an admitted
	// call waited for its place, answered its whole time in admission
	// (waiting and running): the server's latency of admitted calls.
	rejected         func(method string)
	waited, answered func(time.Duration)
}

// waiter is one call waiting for a place; ready is closed when it has one.
type waiter struct {
	ready   chan struct{}
	granted bool // guarded by Admission.mu
}

// NewAdmission returns the admission control of cfg; nil when
// cfg.MaxInFlight is 0.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.MaxInFlight <= 0 {
		return nil
	}
	return &Admission{cfg: cfg, now: time.Now, rejected: func(string) {},
		waited: func(time.Duration) {}, answered: func(time.Duration) {}}
}

// Queued is the number of calls waiting for a place.
func (a *Admission) Queued() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.waiters.Len())
}

// InFlight is the number of admitted calls running.
func (a *Admission) InFlight() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.inFlight)
}

// ExpectedWait is how long a call that found every place taken would
// wait for one now: one service interval for each call ahead of it and
// one for itself. 0 until the queue has been served once.
func (a *Admission) ExpectedWait() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.expectedWaitLocked()
}

func (a *Admission) expectedWaitLocked() time.Duration {
	return time.Duration(float64(a.waiters.Len()+1) * a.drain)
}

// overloadedLocked updates the overload state at now and reports it. It
// is called before the queue forms or empties, so the state sees every
// busy and idle period whole.
func (a *Admission) overloadedLocked(now time.Time) bool {
	if a.waiters.Len() > 0 {
		if now.Sub(a.busySince) >= a.cfg.StandingAfter {
			a.overloaded = true
		}
	} else if now.Sub(a.idleSince) >= a.cfg.IdleAfter {
		a.overloaded = false
	}
	return a.overloaded
}

// refuseLocked reports whether a call that found every place taken at now
// may not wait.
func (a *Admission) refuseLocked(now time.Time) bool {
	switch {
	case a.waiters.Len() >= a.cfg.MaxQueue:
		return true
	case a.waiters.Len() == 0 || a.cfg.MaxWait <= 0:
		return false
	}
	bound := a.cfg.MaxWait
	if !a.overloadedLocked(now) {
		bound = max(bound, a.cfg.StandingAfter)
	}
	return a.expectedWaitLocked() > bound
}

// Overloaded reports whether MaxWait applies now.
func (a *Admission) Overloaded() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.overloadedLocked(a.now())
}

// admit takes a place for one call, waiting in the bounded queue if
// needed; the returned func gives it back.
func (a *Admission) admit(ctx context.Context, method string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < a.cfg.MinDeadline {
		return nil, status.Errorf(codes.DeadlineExceeded, "less than %v left of the call's deadline", a.cfg.MinDeadline)
	}
	arrived := a.now()
	a.mu.Lock()
	if a.inFlight < a.cfg.MaxInFlight && a.waiters.Len() == 0 {
		a.inFlight++
		a.mu.Unlock()
		return a.placed(arrived, arrived), nil
	}
	if a.refuseLocked(arrived) {
		a.mu.Unlock()
		a.rejected(method)
		return nil, status.Error(codes.ResourceExhausted, "server overloaded: retry with backoff")
	}
	w := &waiter{ready: make(chan struct{})}
	if a.waiters.Len() == 0 {
		a.overloadedLocked(arrived) // an idle period ends
		a.busySince = arrived
		a.lastFree = arrived // the queue's first interval starts now
	}
	el := a.waiters.PushBack(w)
	a.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		a.mu.Lock()
		granted := w.granted
		if !granted {
			a.removeLocked(el, a.now())
		}
		a.mu.Unlock()
		if granted { // a place came at the same time: pass it on
			a.free(false)
		}
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	release := a.placed(arrived, a.now())
	// Time spent queueing may have used up the deadline: check again
	// before the model runs.
	if err := ctx.Err(); err != nil {
		release()
		return nil, status.FromContextError(err).Err()
	}
	return release, nil
}

// placed is the release func of a call that arrived at arrived and got
// its place at got.
func (a *Admission) placed(arrived, got time.Time) func() {
	a.waited(got.Sub(arrived))
	var once sync.Once
	return func() {
		once.Do(func() {
			a.answered(a.now().Sub(arrived))
			a.free(true)
		})
	}
}

// free gives a place that has come free to the oldest waiting call, or
// back to the pool; timed: a call has finished with it, which times the
// queue's service interval (not so for a place passed on by a call that
// gave up as it got it).
func (a *Admission) free(timed bool) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	el := a.waiters.Front()
	if el == nil {
		a.inFlight--
		return
	}
	if timed {
		d := float64(now.Sub(a.lastFree))
		if a.drain == 0 {
			a.drain = d
		} else {
			a.drain += drainWeight * (d - a.drain)
		}
		a.lastFree = now
	}
	w := a.removeLocked(el, now)
	w.granted = true
	close(w.ready)
}

// removeLocked takes el out of the queue at now.
func (a *Admission) removeLocked(el *list.Element, now time.Time) *waiter {
	if a.waiters.Len() == 1 {
		a.overloadedLocked(now) // a busy period ends
		a.idleSince = now
	}
	return a.waiters.Remove(el).(*waiter)
}

func (a *Admission) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if a == nil || !admittedMethods[info.FullMethod] {
			return h(ctx, req)
		}
		release, err := a.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer release()
		return h(ctx, req)
	}
}
