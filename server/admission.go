package server

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/classifierd/classifierd/embed/batch"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/answerhold"
)

// AdmissionConfig bounds the calls that run the model at once and the
// calls that may wait for one of those places, and shares both between
// the callers (identities) that want them. Calls past the bounds are
// refused at once with ResourceExhausted, so a saturated daemon answers
// in microseconds instead of queueing clients into their deadlines.
type AdmissionConfig struct {
	MaxInFlight int // model calls running at once (0: no admission control)
	MaxQueue    int // calls waiting for a place, all identities together
	// MaxQueueBytes bounds the request bytes of the waiting calls (0: no
	// bound): MaxQueue calls of the largest message would otherwise hold
	// MaxQueue × 4 MiB.
	MaxQueueBytes int64
	// MaxWait bounds the waiting of calls that carry no deadline of their
	// own (the daemon's --timeout does not count as one) while the daemon
	// is overloaded: such a call that finds every place taken is refused
	// at once if it would wait longer than this for one, estimated from
	// the work ahead of it. A call into an empty queue is always admitted.
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
	// DeadlineShare: a call with a deadline of its own is admitted to wait
	// only when its expected wait plus its expected service fit in this
	// share of the time it has left, and is refused at once otherwise; the
	// rest of its time is the margin for the estimate's error (default
	// DefaultAdmissionDeadlineShare).
	DeadlineShare float64
	// Weights are the identities' weights in the fair shares, by caller
	// name (a token's name, "cert:CN", "anonymous"); 1 when absent.
	Weights map[string]float64
	// ActiveFor is how long an identity keeps its share of the places
	// after its last call ended (0: DefaultAdmissionActiveFor; negative:
	// not at all): a caller that sends one call at a time is idle between
	// them, and without it another caller would take back every place in
	// that gap and make each of its calls wait for one to end.
	ActiveFor time.Duration
	// Cores bounds the long calls running at once while more than one
	// identity is active (0: no bound): a call expected to hold its place
	// longCallFactor times as long as the cheapest calls (a 240 KB
	// Route, mostly CPU: scanning its text, tokenising, running the
	// model) then holds one of Cores as well as a place, and the cores
	// are shared between the active identities as the places are (an
	// identity alone uses every place, as before, so one caller's
	// throughput does not change). The daemon sets it to GOMAXPROCS: places outnumber
	// cores (a short call spends much of its time waiting), so without
	// it one identity's long calls could keep every Go processor busy,
	// and another identity's small call would wait for the network
	// poller and the scheduler's 10 ms time slices at each step (its
	// request read, its handler, its model run), 20-30 ms beside a
	// hog instead of under 1 ms (docs/loadtest.md, "Fifth pass").
	Cores int
}

// DefaultAdmissionActiveFor is the default of AdmissionConfig.ActiveFor,
// and embed/batch's for its model runs: long enough for a client's next
// call after an answer, short enough that a caller who has gone holds
// places back from a busy one only briefly.
const DefaultAdmissionActiveFor = batch.DefaultActiveFor

// DefaultAdmissionMaxWait is the default of AdmissionConfig.MaxWait
// (cmd/classifierd's --max-waiting-time). The 50 ms p99 target of
// docs/loadtest.md is for the whole call: at saturation the admitted
// calls' p99 was about 30 ms above their waiting bound (16 waiting calls,
// about 20 ms of waiting on a quiet 2-core machine, gave 52 ms), so the
// waiting gets 10 ms.
const DefaultAdmissionMaxWait = 10 * time.Millisecond

// DefaultAdmissionDeadlineShare is the default of
// AdmissionConfig.DeadlineShare (--deadline-share): a call with 50 ms
// left may be expected to wait and run for 20 ms of it, leaving the
// estimate 30 ms of error, what the 10 ms bound of calls without a
// deadline needed (docs/loadtest.md).
const DefaultAdmissionDeadlineShare = 0.4

// Defaults of AdmissionConfig.StandingAfter and IdleAfter.
const (
	DefaultAdmissionStandingAfter = 100 * time.Millisecond
	DefaultAdmissionIdleAfter     = time.Second
)

// DefaultAdmissionMaxQueueBytes is the default of
// AdmissionConfig.MaxQueueBytes (--max-waiting-bytes).
const DefaultAdmissionMaxQueueBytes = 64 << 20

const (
	// maxIdleFlows bounds the identities kept active after their last
	// call (ActiveFor): past it the one idle longest is forgotten, so
	// many callers cannot grow the state.
	maxIdleFlows = 4096
	// maxAttemptsPriority caps the attempt count a retried call is
	// ordered by among its own identity's calls.
	maxAttemptsPriority = 10
	// longCallFactor: a call is long (holds one of AdmissionConfig.Cores)
	// when its expected service is at least this many times the
	// expected service of the cheapest size class seen. A ratio, not a
	// duration, so the same calls are long on a fast machine and on a
	// busy one.
	longCallFactor = 4
	// previousAttemptsKey is the metadata gRPC's retry policy sets on a
	// retried call: how many attempts went before it.
	previousAttemptsKey = "grpc-previous-rpc-attempts"
	// retryPushbackKey is the trailer gRPC clients with a retry policy
	// read as the time to wait before retrying.
	retryPushbackKey = "grpc-retry-pushback-ms"
)

// admittedMethods run the model or cost CPU by their request, and are
// admitted by it (Admit); the rest (sessions, index info, stats,
// deleting a terminal session) are cheap, and admitted as AdmitCPU's
// calls, but for the health checks (cpuAdmitted). TrackInputEvent judges and masks a
// prompt of up to 4 KB (milliseconds of CPU; without a prompt_type it
// also runs the model) and GetSessionHistory reads up to 1,000 events of
// up to 8 KB: outside admission, one identity's flood of them took
// another's small Route from p50 1.3 ms to 124 ms with refusals (the
// ninth hostile pass).
var admittedMethods = map[string]bool{
	"/classifier.v1.ClassifierService/Classify":       true,
	"/classifier.v1.ClassifierService/Route":          true,
	"/classifier.v1.ClassifierService/Embed":          true,
	"/classifier.v1.ClassifierService/AnalyzePrompt":  true,
	"/classifier.v1.ClassifierService/DetectContexts": true,
	// ReportUse by query routes the query first (a model run): outside
	// this admission, one identity's reports by query over MCP cost the
	// daemon 24-34 times its client's CPU (the seventeenth hostile pass).
	"/classifier.v1.ClassifierService/ReportUse":      true,
	"/terminal.v1.TerminalService/DetectInputPrompt":  true,
	"/terminal.v1.TerminalService/InferExpectedInput": true,
	"/terminal.v1.TerminalService/TrackInputEvent":    true,
	"/terminal.v1.TerminalService/GetSessionHistory":  true,
}

// historyEventBytes is what one event GetSessionHistory may return counts
// for in its cost expectation: the request is a few bytes, its work is
// its limit's events (admissionBytes).
const historyEventBytes = 64

// admissionBytes is the size admission expects a call's work by (the
// cost model's size classes): the request's encoded size, except for a
// GetSessionHistory, whose work is the events it reads: its limit (100
// when unset) × historyEventBytes, so it is expected to cost what such
// calls cost, not what the smallest Routes do.
func admissionBytes(req any) int64 {
	if h, ok := req.(*terminalpb.GetSessionHistoryRequest); ok {
		n := int64(h.GetLimit())
		if n <= 0 {
			n = 100
		}
		return n * historyEventBytes
	}
	return requestBytes(req)
}

// Admission is the fair, deadline-aware admission of model calls.
//
// MaxInFlight places run calls; no more run at once, ever. Each identity
// (Caller.Quota: a token, a certificate, or an anonymous peer's host) is
// a flow with its own first-in first-out queue; a retried call
// (grpc-previous-rpc-attempts) goes ahead of its identity's calls with
// fewer attempts.
//
// Shares: a flow is active while it has calls waiting or running and for
// ActiveFor after its last one ended. Each active flow's share is
// MaxInFlight × its weight ÷ the active flows' weights, rounded down, at
// least one place. A flow below its share may always take a free place;
// a flow at or above it only a place that is not kept for another active
// flow below its own share. So while another identity is active a hog
// holds no more than its share, and the places it leaves are free when
// the other's next call comes; a newcomer that finds every place taken
// waits for the first call to end, whose place is kept for it. Between
// flows that may start, a free place goes to the one that has received
// the least service per weight (start-time fair queuing by cost: a call
// is charged its expected service time when it starts and corrected to
// the time it really held its place when it ends, so a caller of large
// requests is charged for them). When the queue is full, the flow holding
// the most waiting work per weight gives up its newest call.
//
// A call that must wait is refused at once when it would not finish in
// time: when its own deadline does not leave room for its expected wait
// plus service (DeadlineShare), or, with no deadline of its own, when the
// daemon is overloaded and the wait would pass MaxWait. The expected
// service time of a call is learnt from the calls that ended, by the
// request's size class (costModel); the expected wait from the work ahead
// of the call, without walking the queue (per flow, the waiting work is
// kept by attempt count), so a refusal costs the same however many wait.
type Admission struct {
	cfg AdmissionConfig
	now func() time.Time

	mu       admissionLock
	inFlight int
	long     int   // long calls in flight (each holds a core)
	queued   int   // waiting calls, all flows
	qBytes   int64 // their request bytes
	// runningCost sums the expected service of the calls in flight, for
	// their expected remaining work.
	runningCost float64
	// runs are the calls in flight with their expected ends: a call of a
	// caller below its share takes the next place that comes free, so its
	// expected wait is the time to the next of them (nextEndLocked).
	runs []*run
	// flows are the active flows: with calls waiting or in flight, or
	// idle for less than ActiveFor (those also in idle, oldest first).
	flows    map[string]*flow
	idle     list.List // of *flow
	flowSeq  uint64
	enqueued uint64 // calls that have joined the queue since start
	// arrivals numbers the calls in order of arrival; maxStarted is the
	// greatest number of a call that has started: a waiting call with a
	// smaller number than maxStarted was overtaken (a retry of its
	// identity, another identity's call), so its wait says nothing of
	// the estimate's error.
	arrivals, maxStarted uint64
	// vnow is the virtual time: the service per weight at which the
	// latest call started (start-time fair queuing's). A flow that
	// becomes busy starts at it at least, so time spent idle earns no
	// credit, and a newcomer goes before the calls of flows that have had
	// more.
	vnow float64
	cost costModel
	// trip learns the margin a call's answer needs to reach its caller
	// before the caller's deadline (tripModel; its own lock).
	trip tripModel
	// waitScale is admitted calls' actual waits ÷ the waits expected
	// when they queued (before scaling), as exponentially weighted sums
	// (waitedSum, expectedSum), between 1 and maxWaitScale: the expected
	// wait is multiplied by it, so an estimate that proves too short (a
	// machine slowed by other work, thousands of clients' streams on the
	// same cores) tightens admission instead of letting callers wait
	// into their deadlines. A ratio of sums, not a mean of ratios: a call
	// expected to wait 1 ms that waited 50 ms (a scheduling hiccup on a
	// busy machine) weighs as 1 ms of estimate, not as a 50-fold error.
	//
	// It describes the calls that queue behind others (their own
	// identity's, or the work of flows ahead of them in the fair order)
	// and is applied to those only: a hog's calls waiting behind its own
	// taught it, and applied to another identity's call that takes the
	// next free place it refused that call (issue 27's sixth pass).
	waitScale, waitedSum, expectedSum float64
	// nextScale is the same ratio for the calls of callers below their
	// share with nothing waiting (first calls, which wait for the next
	// end): learnt from and applied to them only.
	nextScale, nextWaitedSum, nextExpectedSum float64
	// busySince is when the queue last formed, idleSince when it last
	// emptied; overloadedLocked keeps overloaded from them.
	busySince, idleSince time.Time
	overloaded           bool

	// rejected counts a refusal; waited records how long an admitted
	// call waited for its place, answered its whole time in admission
	// (waiting and running): the server's latency of admitted calls.
	rejected         func(method string)
	waited, answered func(time.Duration)

	// refusals are the identities' buckets of refusals (under mu), and
	// pastRateRefusals counts the refusals past their rate
	// (admission_refusals.go).
	refusals         keyedLimiters[string]
	pastRateRefusals atomic.Int64

	// reflection are the identities' buckets of reflection requests
	// (edge.go, ReflectionRequestsPerSecond), under reflMu.
	reflMu     sync.Mutex
	reflection keyedLimiters[string]
	// reflOpen counts each identity's reflection streams open
	// (MaxReflectionStreamsPerCaller), under reflMu.
	reflOpen map[string]int

	// failedSetups are the identities' buckets of stream setups that
	// failed (edge.go, FailedSetupsPerSecond), and setupsInFlight their
	// setups running, each holding a place in its bucket until it
	// succeeds or fails (reserveSetup), under setupMu.
	setupMu        sync.Mutex
	failedSetups   keyedLimiters[string]
	setupsInFlight map[string]int
}

// flow is one identity's share: its waiting calls in order and the
// service it has received.
type flow struct {
	key    string
	weight float64
	seq    uint64 // when it became active, to break ties in order
	// vtime is the service received ÷ weight, in nanoseconds of a place.
	vtime    float64
	inFlight int
	long     int // its long calls in flight
	// waiting holds the waiting calls by attempt count (capped at
	// maxAttemptsPriority), each list oldest first: the next call is the
	// oldest of the most attempts.
	waiting [maxAttemptsPriority + 1]list.List // of *waiter
	cWait   [maxAttemptsPriority + 1]float64   // their expected service
	queued  int
	qBytes  int64   // request bytes of the waiting calls
	qCost   float64 // their expected service
	// idleEl is f's element of Admission.idle while it has nothing
	// waiting or running, idleAt when that began.
	idleEl *list.Element
	idleAt time.Time
}

func (f *flow) busy() bool { return f.inFlight > 0 || f.queued > 0 }

// next is f's waiting call that gets its next place (nil: none).
func (f *flow) next() *waiter {
	for k := maxAttemptsPriority; k >= 0; k-- {
		if el := f.waiting[k].Front(); el != nil {
			return el.Value.(*waiter)
		}
	}
	return nil
}

// newest is f's waiting call with the weakest claim: the newest of the
// fewest attempts (nil: none).
func (f *flow) newest() *waiter {
	for k := range f.waiting {
		if el := f.waiting[k].Back(); el != nil {
			return el.Value.(*waiter)
		}
	}
	return nil
}

// waiter is one call waiting for a place; ready is closed when it has
// one (granted) or has been pushed out of the queue (err).
type waiter struct {
	f        *flow
	el       *list.Element
	ready    chan struct{}
	bytes    int64
	cost     float64 // expected service, when it queued
	long     bool    // holds a core once it starts
	cpu      bool    // AdmitCPU's
	attempts int
	granted  bool  // guarded by Admission.mu
	err      error // guarded by Admission.mu
	charged  float64
	expected time.Duration // the wait expected when it queued, unscaled
	next     bool          // it waits for the next end (a first call)
	run      *run          // its place, once granted
	seq      uint64        // its arrival number
	// overtaken: a call that arrived after it started first.
	overtaken bool
}

// run is a call holding a place: when it is expected to give it back,
// and whether it holds a core.
type run struct {
	end  time.Time
	long bool
	i    int // its index in Admission.runs
}

// NewAdmission returns the admission control of cfg; nil when
// cfg.MaxInFlight is 0.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.MaxInFlight <= 0 {
		return nil
	}
	if cfg.DeadlineShare <= 0 || cfg.DeadlineShare > 1 {
		cfg.DeadlineShare = DefaultAdmissionDeadlineShare
	}
	if cfg.ActiveFor == 0 {
		cfg.ActiveFor = DefaultAdmissionActiveFor
	}
	return &Admission{cfg: cfg, mu: newAdmissionLock(), now: time.Now, flows: map[string]*flow{}, waitScale: 1, nextScale: 1, rejected: func(string) {},
		waited: func(time.Duration) {}, answered: func(time.Duration) {},
		refusals:     keyedLimiters[string]{r: AdmissionRefusalsPerSecond, b: AdmissionRefusalBurst, max: maxRefusalBuckets},
		reflection:   keyedLimiters[string]{r: ReflectionRequestsPerSecond, b: ReflectionRequestBurst, max: maxReflectionBuckets},
		failedSetups: keyedLimiters[string]{r: FailedSetupsPerSecond, b: FailedSetupBurst, max: maxFailedSetupBuckets}}
}

// Queued is the number of calls waiting for a place.
func (a *Admission) Queued() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.queued)
}

// InFlight is the number of admitted calls running.
func (a *Admission) InFlight() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.inFlight)
}

// LongInFlight is the number of long calls running, each holding one of
// AdmissionConfig.Cores.
func (a *Admission) LongInFlight() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.long)
}

// Flows is the number of active identities: with calls waiting or
// running, or whose last call ended less than ActiveFor ago. The shares
// are among them.
func (a *Admission) Flows() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now := a.now(); a.forgetLocked(now) {
		a.dispatchLocked(now)
	}
	return int64(len(a.flows))
}

// ExpectedWait is how long a small call of a new identity that found every
// place taken would wait for one now, estimated; 0 until a call has
// ended. The gauge of the queue as a whole: a call of an identity with
// calls already waiting waits longer, one of an identity below its share
// not at all.
func (a *Admission) ExpectedWait() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if a.forgetLocked(now) {
		a.dispatchLocked(now)
	}
	f := a.flows[""] // calls without a caller (tests) are that flow
	if f == nil {
		f = &flow{weight: 1, vtime: a.vnow}
	}
	return a.expectedWaitLocked(f, 0, false, false, now)
}

// WaitScale is what the expected waits are multiplied by: recent admitted
// calls' waits ÷ the waits estimated for them (at least 1).
func (a *Admission) WaitScale() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waitScale
}

// Overloaded reports whether MaxWait applies now.
func (a *Admission) Overloaded() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.overloadedLocked(a.now())
}

// overloadedLocked updates the overload state at now and reports it. It
// is called before the queue forms or empties, so the state sees every
// busy and idle period whole.
func (a *Admission) overloadedLocked(now time.Time) bool {
	if a.queued > 0 {
		if now.Sub(a.busySince) >= a.cfg.StandingAfter {
			a.overloaded = true
		}
	} else if now.Sub(a.idleSince) >= a.cfg.IdleAfter {
		a.overloaded = false
	}
	return a.overloaded
}

// flowLocked returns the flow of key, busy from now on, and whether it
// is new (was not active): a flow that was idle or new starts at the
// virtual time at least, so time spent idle earns it no credit.
func (a *Admission) flowLocked(key string, weight float64) (*flow, bool) {
	f := a.flows[key]
	if f != nil && f.busy() {
		return f, false
	}
	v := a.vnow
	if f == nil {
		a.flowSeq++
		f = &flow{key: key, weight: weight, seq: a.flowSeq, vtime: v}
		a.flows[key] = f
		return f, true
	}
	if f.idleEl != nil {
		a.idle.Remove(f.idleEl)
		f.idleEl = nil
	}
	f.weight = weight
	f.vtime = max(f.vtime, v)
	return f, false
}

// idleLocked marks f idle at now once it has nothing waiting or running:
// it keeps its share for ActiveFor, unless that is off. It reports
// whether a flow was forgotten (its kept places are free: dispatch).
func (a *Admission) idleLocked(f *flow, now time.Time) bool {
	if f.busy() || f.idleEl != nil || a.flows[f.key] != f {
		return false
	}
	if a.cfg.ActiveFor < 0 {
		delete(a.flows, f.key)
		return true
	}
	f.idleAt = now
	f.idleEl = a.idle.PushBack(f)
	return a.forgetLocked(now)
}

// forgetLocked forgets the flows idle for ActiveFor or longer at now,
// and the longest idle past maxIdleFlows; it reports whether it forgot
// any (the places they kept are free for others).
func (a *Admission) forgetLocked(now time.Time) bool {
	forgot := false
	for el := a.idle.Front(); el != nil; el = a.idle.Front() {
		f := el.Value.(*flow)
		if a.idle.Len() <= maxIdleFlows && now.Sub(f.idleAt) < a.cfg.ActiveFor {
			break
		}
		a.idle.Remove(el)
		f.idleEl = nil
		delete(a.flows, f.key)
		forgot = true
	}
	return forgot
}

// shares is the active flows' weights and the places kept for flows
// below their shares, for mayStartLocked.
type shares struct {
	weights float64
	kept    int
	// keptCores is the cores kept for flows below their share of
	// AdmissionConfig.Cores.
	keptCores int
}

// sharesLocked sums the active flows' weights and the places each of
// them below its share has kept.
func (a *Admission) sharesLocked() shares {
	var s shares
	for _, f := range a.flows {
		s.weights += f.weight
	}
	for _, f := range a.flows {
		s.kept += max(0, a.shareLocked(f, s.weights)-f.inFlight)
		s.keptCores += max(0, a.coreShareLocked(f, s.weights)-f.long)
	}
	return s
}

// coreShareLocked is f's share of AdmissionConfig.Cores among active
// flows of total weight w: at least one core.
func (a *Admission) coreShareLocked(f *flow, w float64) int {
	if w <= 0 {
		return a.cfg.Cores
	}
	return max(1, int(math.Floor(float64(a.cfg.Cores)*f.weight/w+1e-9)))
}

// sharedLocked reports whether another flow than f is active: the
// cores are shared then.
func (a *Admission) sharedLocked(f *flow) bool {
	n := len(a.flows)
	if a.flows[f.key] == f {
		n--
	}
	return n > 0
}

// longLocked reports whether a call of expected service c is long: it
// holds a core (AdmissionConfig.Cores) while it runs.
func (a *Admission) longLocked(c float64) bool {
	return a.cfg.Cores > 0 && a.cost.trained() && c >= longCallFactor*a.cost.cheapest()
}

// holdsCoreLocked reports whether a call of expected service c holds a
// core while it runs: a long one, or one of AdmitCPU's (cpu).
func (a *Admission) holdsCoreLocked(c float64, cpu bool) bool {
	return (cpu && a.cfg.Cores > 0) || a.longLocked(c)
}

// shareLocked is f's share of the places among active flows of total
// weight w: at least one place.
func (a *Admission) shareLocked(f *flow, w float64) int {
	if w <= 0 {
		return a.cfg.MaxInFlight
	}
	return max(1, int(math.Floor(float64(a.cfg.MaxInFlight)*f.weight/w+1e-9)))
}

// withinShareLocked reports whether a call of f, with its caller's
// calls running and waiting, is within f's share of the places (and of
// the cores for a long call while they are shared). With nothing of f
// waiting, such a call is a first call: it takes the next place that
// comes free (refuseLocked).
func (a *Admission) withinShareLocked(f *flow, s shares, long bool) bool {
	return a.shareLocked(f, s.weights) > f.inFlight+f.queued &&
		(!long || !a.sharedLocked(f) || a.coreShareLocked(f, s.weights) > f.long+f.queued)
}

// mayStartLocked reports whether f may start a call now: a place is free
// and f is below its share, or the free places outnumber those kept for
// the other flows below theirs; and for a long call while more than one
// flow is active, the same of the cores.
func (a *Admission) mayStartLocked(f *flow, s shares, long bool) bool {
	free := a.cfg.MaxInFlight - a.inFlight
	if free <= 0 {
		return false
	}
	own := a.shareLocked(f, s.weights) - f.inFlight
	if own <= 0 && free <= s.kept {
		return false
	}
	if !long || !a.sharedLocked(f) {
		return true // a caller alone may use every place
	}
	freeCores := a.cfg.Cores - a.long
	if freeCores <= 0 {
		return false
	}
	return a.coreShareLocked(f, s.weights) > f.long || freeCores > s.keptCores
}

// startLocked gives f a place at now for a call of the given size and
// charges f its expected service; it returns the charge and the place.
func (a *Admission) startLocked(f *flow, bytes int64, seq uint64, long bool, now time.Time) (float64, *run) {
	a.maxStarted = max(a.maxStarted, seq)
	a.inFlight++
	f.inFlight++
	if long {
		a.long++
		f.long++
	}
	a.vnow = max(a.vnow, f.vtime) // the call's start tag
	c := a.cost.predict(float64(bytes))
	a.runningCost += c
	f.vtime += c / f.weight
	r := &run{end: now.Add(time.Duration(c)), long: long, i: len(a.runs)}
	a.runs = append(a.runs, r)
	return c, r
}

// endRunLocked forgets r, a place given back.
func (a *Admission) endRunLocked(r *run) {
	if r == nil || r.i >= len(a.runs) || a.runs[r.i] != r {
		return
	}
	last := a.runs[len(a.runs)-1]
	a.runs[r.i], last.i = last, r.i
	a.runs[len(a.runs)-1] = nil
	a.runs = a.runs[:len(a.runs)-1]
}

// nextEndLocked is how long, at now, until the place a first call of f
// waits for comes free: the (k+1)-th next expected end of the calls in
// flight (of the long ones, for a long call waiting for a core while the
// cores are shared), where k other flows below their share have calls
// waiting for one too. A
// call past its expected end counts as ending now. It walks the calls in
// flight, no more than MaxInFlight.
func (a *Admission) nextEndLocked(f *flow, long bool, now time.Time) float64 {
	var buf [64]float64
	rem := buf[:0]
	for _, r := range a.runs {
		if !long || r.long {
			rem = append(rem, max(0, float64(r.end.Sub(now))))
		}
	}
	if len(rem) == 0 {
		return 0
	}
	k := 0
	var weights float64
	for _, g := range a.flows {
		weights += g.weight
	}
	for _, g := range a.flows {
		if g != f && g.queued > 0 && a.shareLocked(g, weights) > g.inFlight {
			k++
		}
	}
	slices.Sort(rem)
	return rem[min(k, len(rem)-1)]
}

// dispatchLocked starts waiting calls while a flow with waiting calls may
// start one: the one with the least service per weight first.
func (a *Admission) dispatchLocked(now time.Time) {
	for a.queued > 0 && a.inFlight < a.cfg.MaxInFlight {
		s := a.sharesLocked()
		var pick *flow
		for _, f := range a.flows {
			if f.queued == 0 || !a.mayStartLocked(f, s, f.next().long) {
				continue
			}
			if pick == nil || f.vtime < pick.vtime || (f.vtime == pick.vtime && f.seq < pick.seq) {
				pick = f
			}
		}
		if pick == nil {
			return
		}
		w := a.removeLocked(pick.next(), now)
		w.overtaken = a.maxStarted > w.seq
		w.charged, w.run = a.startLocked(pick, w.bytes, w.seq, w.long, now)
		w.granted = true
		close(w.ready)
	}
}

// removeLocked takes w out of the queue at now.
func (a *Admission) removeLocked(w *waiter, now time.Time) *waiter {
	if a.queued == 1 {
		a.overloadedLocked(now) // a busy period ends
		a.idleSince = now
	}
	f, k := w.f, w.attempts
	f.waiting[k].Remove(w.el)
	f.cWait[k] -= w.cost
	f.queued--
	f.qBytes -= w.bytes
	f.qCost -= w.cost
	if f.queued == 0 { // no drift from float sums
		f.cWait, f.qCost = [maxAttemptsPriority + 1]float64{}, 0
	}
	a.queued--
	a.qBytes -= w.bytes
	return w
}

// enqueueLocked puts w in its flow's queue: behind the calls with as
// many attempts or more, ahead of those with fewer.
func (a *Admission) enqueueLocked(w *waiter, now time.Time) {
	if a.queued == 0 {
		a.overloadedLocked(now) // an idle period ends
		a.busySince = now
	}
	f, k := w.f, w.attempts
	w.el = f.waiting[k].PushBack(w)
	f.cWait[k] += w.cost
	f.queued++
	f.qBytes += w.bytes
	f.qCost += w.cost
	a.queued++
	a.qBytes += w.bytes
	a.enqueued++
}

// expectedWaitLocked estimates how long a call of f with attempts earlier
// attempts would wait for a place if it queued now: f's calls ahead of
// it, on the places f may use (all but those kept for other flows below
// their shares); and, when other flows have calls waiting too, each one's
// waiting work until it has received as much service per weight as f
// will have by then (as weighted fair queuing serves them), on all the
// places; plus a place coming free. 0 before any call has ended. It does
// not walk the queue: f's waiting work is kept by attempt count.
//
// A first call (next: f is below its share with nothing waiting) takes
// the next place that comes free before any other flow's waiting calls:
// its wait is the time to the next end of a call in flight
// (nextEndLocked), scaled by what such calls have taught (nextScale),
// not the mean running call, nor the scale the queued calls taught.
func (a *Admission) expectedWaitLocked(f *flow, attempts int, long, next bool, now time.Time) time.Duration {
	if !a.cost.trained() {
		return 0
	}
	if next {
		return time.Duration(a.nextScale * a.nextEndLocked(f, long && a.sharedLocked(f), now))
	}
	var ahead float64
	for k := attempts; k <= maxAttemptsPriority; k++ {
		ahead += f.cWait[k]
	}
	start := f.vtime + ahead/f.weight
	work := ahead
	var weights float64
	for _, g := range a.flows {
		weights += g.weight
	}
	if a.flows[f.key] != f {
		weights += f.weight
	}
	places := float64(a.cfg.MaxInFlight)
	share := a.shareLocked
	inFlight := func(g *flow) int { return g.inFlight }
	if long && a.sharedLocked(f) { // it waits for a core
		places, share = float64(a.cfg.Cores), a.coreShareLocked
		inFlight = func(g *flow) int { return g.long }
	}
	kept := 0
	for _, g := range a.flows {
		if g == f {
			continue
		}
		kept += max(0, share(g, weights)-inFlight(g))
		if g.queued > 0 {
			work += math.Min(g.qCost, math.Max(0, (start-g.vtime)*g.weight))
		}
	}
	// A place comes free after about the mean running call ÷ places.
	var free float64
	if a.inFlight > 0 {
		free = a.runningCost / float64(a.inFlight)
	}
	mine := math.Max(1, places-float64(kept))
	wait := math.Max((ahead+free)/mine, (work+free)/places)
	return time.Duration(a.waitScale * wait)
}

// waitedLocked learns from a call that expected to wait expected and
// waited waited; estimates under a millisecond say too little. Only
// calls nobody overtook count: the estimate is of the work ahead when a
// call queues, and a retry or another identity's call that goes ahead
// later is the fair order, not the estimate's error (learnt from, the
// calls of 400 clients retrying, all overtaken by retries, inflated the
// estimate, which refused more calls, which retried: 94-98 % of their
// calls answered instead of 100 %).
func (a *Admission) waitedLocked(expected, waited time.Duration) {
	learnScale(&a.waitScale, &a.waitedSum, &a.expectedSum, expected, waited)
}

// nextWaitedLocked is waitedLocked for a first call, which waited for
// the next end: it teaches nextScale only.
func (a *Admission) nextWaitedLocked(expected, waited time.Duration) {
	learnScale(&a.nextScale, &a.nextWaitedSum, &a.nextExpectedSum, expected, waited)
}

// learnScale adds a call that expected to wait expected and waited
// waited to the sums of a wait scale.
func learnScale(scale, waitedSum, expectedSum *float64, expected, waited time.Duration) {
	if expected < time.Millisecond {
		return
	}
	e, w := float64(expected), min(float64(waited), maxWaitScale*float64(expected))
	if *expectedSum == 0 { // as if the last calls had waited as expected
		*expectedSum, *waitedSum = e/(1-waitScaleDecay), e/(1-waitScaleDecay)
	}
	*expectedSum = waitScaleDecay**expectedSum + e
	*waitedSum = waitScaleDecay**waitedSum + w
	*scale = min(max(1, *waitedSum / *expectedSum), maxWaitScale)
}

const (
	// waitScaleDecay is the weight of the past in waitScale's sums at
	// each admitted call: about the last 20 count.
	waitScaleDecay = 0.95
	// maxWaitScale bounds waitScale.
	maxWaitScale = 20
)

// refusal is a RESOURCE_EXHAUSTED that says when to come back.
func refusal(why string, after time.Duration) error {
	after = min(max(after, time.Millisecond), 10*time.Second)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("server overloaded: %s; retry with backoff (in about %v)", why, after.Round(time.Millisecond)))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
		st = d
	}
	return st.Err()
}

// retryAfter is the retry delay a refusal carries (0 if none).
func retryAfter(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// refuseLocked reports why a call with the given expected wait and
// service may not wait, or "" if it may. first: the call's caller is
// below its share with nothing waiting, so the call takes the next place
// that comes free (at most one running call away). Refused for its
// deadline, such a call is told to retry when that place comes free: it
// is kept for its caller (admit). within: the caller's calls, running
// and waiting, this one counted, are within its share (of the places;
// of the cores too for a long call while the cores are shared). MaxWait,
// the bound of waiting behind a standing queue, applies to neither (the
// call's own deadline does): such a call waits for places its caller is
// owed, which the scheduler gives it before any caller above its share,
// and a caller has at most its share of them waiting. Without it a
// caller's second concurrent call beside a hog was refused whenever the
// first was still waiting (3.5 % of a two-client caller's calls).
func (a *Admission) refuseLocked(ctx context.Context, now time.Time, wait, service time.Duration, first, within bool) (string, time.Duration) {
	if !a.cost.trained() {
		return "", 0 // only the count bounds the queue until a call has ended
	}
	if dl, own := ownDeadline(ctx); own {
		// The answer must also get back to the caller in time: the time
		// left less the learnt return trip is what the call may use.
		margin := a.trip.get(now)
		budget := time.Duration(a.cfg.DeadlineShare * float64(dl.Sub(now)-margin))
		if wait+service > budget {
			after := wait + service - budget
			if first { // the place kept for its caller comes free then
				after = max(after, wait)
			}
			return fmt.Sprintf("expected wait %v, service %v and return %v do not fit in the call's deadline", wait.Round(time.Millisecond),
				service.Round(time.Millisecond), margin.Round(time.Millisecond)), after
		}
		return "", 0
	}
	if a.queued == 0 || a.cfg.MaxWait <= 0 || first || within {
		return "", 0
	}
	bound := a.cfg.MaxWait
	if !a.overloadedLocked(now) {
		bound = max(bound, a.cfg.StandingAfter)
	}
	if wait > bound {
		return fmt.Sprintf("expected wait %v, limit %v", wait.Round(time.Millisecond), bound), wait - bound
	}
	return "", 0
}

// pushOutLocked makes room in a full queue for a call of f with bytes of
// request and attempts earlier attempts: it takes the newest call of the
// flow holding the most waiting work per weight (counting the newcomer),
// if that is another flow's, or one of f's own with fewer attempts. It
// reports false when nothing may give way: the newcomer is refused.
func (a *Admission) pushOutLocked(f *flow, bytes int64, attempts int, now time.Time) bool {
	victim := a.pushOutVictimLocked(f, bytes, attempts)
	if victim == nil {
		return false
	}
	last := victim.newest()
	a.removeLocked(last, now)
	last.err = refusal("pushed out of the full queue by a call with a better claim", a.expectedWaitLocked(victim, 0, false, false, now))
	close(last.ready)
	a.idleLocked(victim, now)
	return true
}

// pushOutVictimLocked is the flow whose newest call pushOutLocked would
// push out of the full queue for a call of f (bytes, attempts), or nil
// when nothing may give way. It changes nothing (the tap's precheck asks
// it too).
func (a *Admission) pushOutVictimLocked(f *flow, bytes int64, attempts int) *flow {
	var victim *flow
	worst := -1.0
	for _, g := range a.flows {
		n, c := g.queued, g.qCost
		if g == f {
			n, c = n+1, c+a.cost.predict(float64(bytes))
		}
		if n == 0 {
			continue
		}
		load := c / g.weight
		if !a.cost.trained() {
			load = float64(n) / g.weight
		}
		if load > worst || (load == worst && g == f) {
			victim, worst = g, load
		}
	}
	if victim == nil || victim.queued == 0 {
		return nil
	}
	if victim == f && victim.newest().attempts >= attempts {
		return nil
	}
	return victim
}

// fullWhyLocked is why a call is refused for a full queue.
func (a *Admission) fullWhyLocked() string {
	if a.queued < a.cfg.MaxQueue {
		return fmt.Sprintf("%d bytes of requests waiting, limit %d", a.qBytes, a.cfg.MaxQueueBytes)
	}
	return fmt.Sprintf("%d calls waiting, limit %d", a.queued, a.cfg.MaxQueue)
}

// fullLocked reports whether a call of bytes has no room in the queue.
func (a *Admission) fullLocked(bytes int64) bool {
	return a.queued >= a.cfg.MaxQueue || (a.cfg.MaxQueueBytes > 0 && a.queued > 0 && a.qBytes+bytes > a.cfg.MaxQueueBytes)
}

// callerFlow is the flow key and weight of ctx's caller.
func (a *Admission) callerFlow(ctx context.Context) (string, float64) {
	return a.flowOf(CallerFrom(ctx))
}

// flowOf is the flow key and weight of caller c.
func (a *Admission) flowOf(c Caller) (string, float64) {
	w := 1.0
	if v, ok := a.cfg.Weights[c.Name]; ok && v > 0 {
		w = v
	}
	return c.Quota, w
}

// previousAttempts is the grpc-previous-rpc-attempts of ctx's call,
// capped.
func previousAttempts(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(previousAttemptsKey)
	if len(v) == 0 {
		return 0
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 0 {
		return 0
	}
	return min(n, maxAttemptsPriority)
}

// requestBytes is the encoded size of a request message (0 for anything
// else).
func requestBytes(req any) int64 {
	if m, ok := req.(proto.Message); ok {
		return int64(proto.Size(m))
	}
	return 0
}

// Admit takes a place for one model call that reaches the domain other
// than through the gRPC server (an MCP tool call) under the same shares
// as gRPC calls: its caller is CallerFrom(ctx), method names it in the
// refusals' metric, bytes is its request's size. It returns ctx marked
// with the caller's flow for the model's queue (embed/batch) and the
// func that gives the place back; or a RESOURCE_EXHAUSTED (with a retry
// delay) or DEADLINE_EXCEEDED status. A nil Admission admits every call.
func (a *Admission) Admit(ctx context.Context, method string, bytes int64) (context.Context, func(), error) {
	if a == nil {
		return ctx, func() {}, nil
	}
	release, err := a.admit(ctx, method, bytes)
	if err != nil {
		return ctx, nil, err
	}
	key, weight := a.callerFlow(ctx)
	return batch.WithFlow(ctx, key, weight), release, nil
}

// AdmitCPU takes a place for one call that runs no model and whose work
// is the daemon's own CPU, such as an MCP tools/list, whose answer (14 KB
// of JSON schemas) is encoded in its place: as Admit, under the caller's
// share, with a request of no size, and while another identity is active
// it holds one of AdmissionConfig.Cores as well as a place, as a long
// call does, so one identity's such calls keep no more than its share of
// the cores busy (its share of the places is every core on a 2-core
// machine). Its cost is learnt apart from every model call's (the size
// class of empty requests, which costModel.cheapest leaves out). A nil
// Admission admits every call.
func (a *Admission) AdmitCPU(ctx context.Context, method string) (context.Context, func(), error) {
	if a == nil {
		return ctx, func() {}, nil
	}
	release, err := a.admitAs(ctx, method, 0, true)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, release, nil
}

// admit takes a place for one call of bytes of request, waiting in its
// identity's queue if needed; the returned func gives it back.
func (a *Admission) admit(ctx context.Context, method string, bytes int64) (func(), error) {
	return a.admitAs(ctx, method, bytes, false)
}

// admitAs is admit, for one of AdmitCPU's calls if cpu.
func (a *Admission) admitAs(ctx context.Context, method string, bytes int64, cpu bool) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(a.now()) < a.cfg.MinDeadline {
		return nil, status.Errorf(codes.DeadlineExceeded, "less than %v left of the call's deadline", a.cfg.MinDeadline)
	}
	key, weight := a.callerFlow(ctx)
	attempts := previousAttempts(ctx)
	arrived := a.now()
	// The lock's waiters leave when their calls end: on a saturated
	// daemon a call may wait for it longer than its caller waits for the
	// answer (admissionLock).
	if err := a.mu.LockCtx(ctx); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if err := ctx.Err(); err != nil {
		a.mu.Unlock()
		return nil, status.FromContextError(err).Err()
	}
	a.arrivals++
	seq := a.arrivals
	if a.forgetLocked(arrived) {
		a.dispatchLocked(arrived) // places kept for the forgotten are free
	}
	f, fresh := a.flowLocked(key, weight)
	s := a.sharesLocked()
	cost := a.cost.predict(float64(bytes))
	long := a.holdsCoreLocked(cost, cpu)
	if f.queued == 0 && a.mayStartLocked(f, s, long) {
		charged, r := a.startLocked(f, bytes, seq, long, arrived)
		a.mu.Unlock()
		return a.placed(ctx, f, bytes, charged, long, r, arrived, arrived), nil
	}
	within := a.withinShareLocked(f, s, long)
	first := f.queued == 0 && within
	wait := a.expectedWaitLocked(f, attempts, long, first, arrived)
	why, after := a.refuseLocked(ctx, arrived, wait, time.Duration(cost), first, within)
	if why == "" && a.fullLocked(bytes) && !a.pushOutLocked(f, bytes, attempts, arrived) {
		why, after = a.fullWhyLocked(), wait
	}
	if why != "" {
		// A caller refused at once keeps no share, unless it was below
		// its share: then the place that comes free next is kept for it
		// (for ActiveFor), so its next call, or this one's retry, starts
		// at once. Without it a caller whose deadline the next end would
		// not fit was refused, was never active, and had every next call
		// refused, the hog taking each place that came free.
		if fresh && !f.busy() && !first {
			delete(a.flows, key)
		} else if a.idleLocked(f, arrived) {
			a.dispatchLocked(arrived)
		}
		past := a.refusedLocked(key, arrived)
		a.mu.Unlock()
		a.rejected(method)
		a.pastRate(ctx, past)
		return nil, refusal(why, after)
	}
	scale := a.waitScale
	if first {
		scale = a.nextScale
	}
	w := &waiter{f: f, ready: make(chan struct{}), bytes: bytes, cost: cost, long: long, cpu: cpu, attempts: attempts,
		expected: time.Duration(float64(wait) / scale), seq: seq, next: first}
	a.enqueueLocked(w, arrived)
	a.dispatchLocked(arrived) // a push-out may have forgotten a flow and freed its places
	a.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		a.mu.Lock()
		granted, pushed := w.granted, w.err != nil
		if !granted && !pushed {
			now := a.now()
			a.removeLocked(w, now)
			// A call whose deadline ended while it waited longer than
			// expected, nobody having overtaken it, waited at least that
			// long: the estimate was short (a lower bound, as in done).
			if waited := now.Sub(arrived); a.maxStarted <= w.seq && waited > w.expected {
				a.learnWaitLocked(w, waited)
			}
			a.idleLocked(f, now)
			a.dispatchLocked(now) // shares may have changed
		}
		a.mu.Unlock()
		if granted { // a place came at the same time: give it back
			a.done(f, bytes, w.charged, w.long, w.run, 0, false, a.now())
		}
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if w.err != nil { // pushed out of the queue: a refusal too
		a.mu.Lock()
		past := a.refusedLocked(key, a.now())
		a.mu.Unlock()
		a.rejected(method)
		a.pastRate(ctx, past)
		return nil, w.err
	}
	got := a.now()
	a.mu.Lock()
	if !w.overtaken {
		a.learnWaitLocked(w, got.Sub(arrived))
	}
	a.mu.Unlock()
	release := a.placed(ctx, f, bytes, w.charged, w.long, w.run, arrived, got)
	// Time spent queueing may have used up the deadline: check again
	// before the model runs.
	if err := ctx.Err(); err != nil {
		release()
		return nil, status.FromContextError(err).Err()
	}
	return release, nil
}

// learnWaitLocked teaches the wait scale of w's kind of call (first or
// queued) that w waited waited.
func (a *Admission) learnWaitLocked(w *waiter, waited time.Duration) {
	if w.next {
		a.nextWaitedLocked(w.expected, waited)
	} else {
		a.waitedLocked(w.expected, waited)
	}
}

// placed is the release func of a call of f with context ctx that
// arrived at arrived and got its place at got, charged charged.
func (a *Admission) placed(ctx context.Context, f *flow, bytes int64, charged float64, long bool, r *run, arrived, got time.Time) func() {
	a.waited(got.Sub(arrived))
	var once sync.Once
	return func() {
		once.Do(func() {
			now := a.now()
			a.answered(now.Sub(arrived))
			served := now.Sub(got)
			// A call cut short by its caller or deadline held its place
			// for less than its work: it is charged what it held, and it
			// teaches the cost model only a lower bound (done).
			a.done(f, bytes, charged, long, r, served, ctx.Err() == nil, now)
		})
	}
}

// done gives back the place of a call of f with bytes of request that
// held it for served (0: it never ran), corrects f's charge from the
// expected service to served, learns the service time if learn, and
// gives the place to the next waiting call. A call cut short (not learn)
// held its place for less than its work: its time is a lower bound of its
// service, learnt only when it is above the expected service. Below, it
// says nothing (16 cancelled 240 KB calls, learnt from, made the model
// expect them ten times faster); above, it is the news that matters most:
// on a machine slower than the estimate, the calls that run into their
// deadlines are the ones that end cut short, and learning only from the
// calls that ended in time kept the estimate low, so calls with 50 ms
// deadlines were admitted that then took 200-800 ms in the daemon
// (docs/loadtest.md, "Fifth pass").
func (a *Admission) done(f *flow, bytes int64, charged float64, long bool, r *run, served time.Duration, learn bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.endRunLocked(r)
	a.inFlight--
	f.inFlight--
	if long {
		a.long--
		f.long--
	}
	a.runningCost -= charged
	if a.inFlight == 0 {
		a.runningCost = 0 // no drift from float sums
	}
	f.vtime += (float64(served) - charged) / f.weight
	if served > 0 && (learn || (a.cost.trained() && float64(served) > a.cost.predict(float64(bytes)))) {
		first := !a.cost.trained()
		a.cost.observe(float64(bytes), float64(served))
		if first {
			a.repriceLocked()
		}
	}
	a.forgetLocked(now)
	a.idleLocked(f, now)
	a.dispatchLocked(now)
}

// repriceLocked sets the expected service of every waiting call from the
// cost model: once, when it learns its first call, as the calls that
// queued before were priced at nothing.
func (a *Admission) repriceLocked() {
	for _, f := range a.flows {
		f.qCost = 0
		for k := range f.waiting {
			f.cWait[k] = 0
			for el := f.waiting[k].Front(); el != nil; el = el.Next() {
				w := el.Value.(*waiter)
				w.cost = a.cost.predict(float64(w.bytes))
				w.long = a.holdsCoreLocked(w.cost, w.cpu)
				f.cWait[k] += w.cost
				f.qCost += w.cost
			}
		}
	}
}

// cpuAdmitted reports whether a unary call of method that runs no model
// passes admission as AdmitCPU's: every one but the health checks, which
// a load balancer must have answered however busy the daemon is, and
// which are bounded per peer and connection (healthCheck). Outside admission a
// flood of GetIndexInfo by one identity over HTTP (864 calls a second)
// cost the daemon 14 times its client's CPU and took another identity's
// Route from p50 3-4 ms to 19-20 ms (the sixteenth hostile pass): within
// it, such calls hold no more than their caller's share of the cores,
// and their refusals count to the caller's rate (admission_refusals.go).
func cpuAdmitted(method string) bool {
	return !strings.HasPrefix(method, "/grpc.health.v1.Health/")
}

func (a *Admission) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if a == nil {
			return h(ctx, req)
		}
		if !admittedMethods[info.FullMethod] {
			if !cpuAdmitted(info.FullMethod) {
				return h(ctx, req)
			}
			ctx, release, err := a.AdmitCPU(ctx, info.FullMethod)
			if err != nil {
				setPushback(ctx, err)
				return nil, err
			}
			defer answerhold.Until(ctx, release)
			return h(ctx, req)
		}
		if chunkedMethods[info.FullMethod] {
			return h(context.WithValue(ctx, chunkAdmitKey{}, chunkAdmitter{a, info.FullMethod}), req)
		}
		ctx, release, err := a.Admit(ctx, info.FullMethod, admissionBytes(req))
		if err != nil {
			setPushback(ctx, err)
			return nil, err
		}
		// On the HTTP/JSON listener the place is kept until the answer
		// is encoded (answerhold); here, until the handler returns.
		defer answerhold.Until(ctx, release)
		return h(ctx, req)
	}
}

// defaultDeadlineKey marks a context whose deadline is the daemon's
// --timeout, not the caller's.
type defaultDeadlineKey struct{}

// WithDefaultTimeout returns ctx with the daemon's default timeout d
// (--timeout), marked as not the caller's own deadline: admission then
// bounds the call's waiting by MaxWait, not by a share of d. The MCP
// listeners give their tool calls their deadline with it.
func WithDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return withDefaultDeadline(ctx, d)
}

// withDefaultDeadline returns ctx with the daemon's default timeout d,
// marked as not the caller's own.
func withDefaultDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	return context.WithValue(ctx, defaultDeadlineKey{}, true), cancel
}

// ownDeadline is the deadline the caller set on ctx's call, if it set one.
func ownDeadline(ctx context.Context) (time.Time, bool) {
	dl, ok := ctx.Deadline()
	if !ok || ctx.Value(defaultDeadlineKey{}) != nil {
		return time.Time{}, false
	}
	return dl, true
}

// costModel learns a call's service time (how long it holds its place,
// in nanoseconds) by the size of its request: an exponentially weighted
// mean per size class (powers of 4 bytes), so large requests (a 240 KB
// Route embeds several long texts and scans the whole text) cost more
// than small ones, each class remembers its own recent calls however
// many calls of other sizes come between, and the estimate follows the
// machine's speed and load. (A least-squares line over all calls, before
// it, let a caller's many small calls wash out the few large ones: its
// slope put a 240 KB call anywhere from 70 ms to 1.3 s within a minute.)
// Guarded by Admission.mu.
type costModel struct {
	mean, size [costClasses]float64 // per class: service and request size (0: none seen)
	any        bool
}

const (
	// costClasses: class k holds requests of [4^k/2, 4^(k+1)/2) bytes
	// (about), the last everything larger (up to the 4 MiB message).
	costClasses = 12
	// costWeight is the weight of the newest call in its class's means:
	// about the last 10 count.
	costWeight = 0.1
)

func costClass(x float64) int {
	return min(bits.Len64(uint64(max(x, 0)))/2, costClasses-1)
}

func (m *costModel) trained() bool { return m.any }

// cheapest is the expected service of the cheapest size class seen (0:
// none yet), leaving out the class of empty requests (under 2 bytes):
// those run no model (AdmitCPU's calls, an empty Route refused before
// it), so a call ten times theirs is not long.
func (m *costModel) cheapest() float64 {
	c := 0.0
	for _, v := range m.mean[1:] {
		if v > 0 && (c == 0 || v < c) {
			c = v
		}
	}
	return c
}

// observe adds a call of x bytes that held its place y nanoseconds.
func (m *costModel) observe(x, y float64) {
	c := costClass(x)
	if m.mean[c] == 0 {
		m.mean[c], m.size[c] = y, max(x, 1)
	} else {
		m.mean[c] += costWeight * (y - m.mean[c])
		m.size[c] += costWeight * (max(x, 1) - m.size[c])
	}
	m.any = true
}

// predict is the expected service of a call of x bytes: its class's
// mean; for a class not seen yet, interpolated by size between the
// nearest classes seen, or the nearest one's mean (no extrapolation: a
// first large call is not refused on a guess, and teaches its class).
func (m *costModel) predict(x float64) float64 {
	c := costClass(x)
	if m.mean[c] > 0 || !m.any {
		return m.mean[c]
	}
	lo, hi := -1, -1
	for k := c - 1; k >= 0; k-- {
		if m.mean[k] > 0 {
			lo = k
			break
		}
	}
	for k := c + 1; k < costClasses; k++ {
		if m.mean[k] > 0 {
			hi = k
			break
		}
	}
	switch {
	case lo < 0:
		return m.mean[hi]
	case hi < 0:
		return m.mean[lo]
	}
	t := min(max((x-m.size[lo])/(m.size[hi]-m.size[lo]), 0), 1)
	return m.mean[lo] + t*(m.mean[hi]-m.mean[lo])
}
