package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// Edge is everything between the socket and the services: metrics,
// recovery and default deadlines (Interceptors), request decoding errors,
// authentication and admission, in that order; before them, as a call's
// headers arrive, the tap: authentication, then admission's early
// refusal (Admission.tap), then the receive timer.
type Edge struct {
	Log       *slog.Logger
	Stats     *Stats
	Timeout   time.Duration // default deadline of calls that carry none
	Metrics   *Metrics      // nil: no metrics
	Auth      AuthConfig
	Admission *Admission // nil: no admission control
	// RecvTimeout bounds how long a call's request message may take to
	// arrive after its headers (0: unbounded); past it the call ends
	// with DEADLINE_EXCEEDED and its buffer is freed.
	RecvTimeout time.Duration
	// MaxConcurrentStreams is the most calls one connection may have
	// open at once (0: gRPC's default, unlimited).
	MaxConcurrentStreams uint32
	// Recv, if set, bounds the request bytes the connections of the
	// listener it wraps (RecvGuard.Listener) hold while their calls'
	// messages arrive, against the budget every listener shares, and
	// the answer bytes handed to them not yet written (unread.go).
	Recv *RecvGuard
	// BodyRate and BadBodies, if set, hold each caller's request
	// messages, and those refused INVALID_ARGUMENT, to rates of bytes
	// shared with the HTTP listeners (bodyrate.go).
	BodyRate, BadBodies ByteRate
}

// MaxHeaderListBytes bounds the header block of one gRPC call (its
// metadata, HPACK-decoded), as --http-listen bounds a request's head. A
// header block arrives, and is held, before any interceptor or the
// authentication tap runs: at grpc-go's default of 16 MiB a client with
// no token held 15 MB per connection by sending a header block and never
// ending it (60 connections: +888 MB, until --idle-timeout). A bearer
// token, a deadline and trace context need a few hundred bytes. HPACK
// lets a client repeat a 4 KB value by a one-byte reference, so each call
// of 15 references cost the daemon 60 KB of values decoded before its
// token was checked (4.6 times the client's CPU, the sixteenth hostile
// pass); 16 KiB was 64.
const MaxHeaderListBytes = 16 << 10

// HandshakeTimeout bounds how long a new gRPC connection may take to
// finish its TLS handshake and HTTP/2 preface, as the HTTP listeners
// bound a request head (10 s). Such a connection has sent no token yet:
// at grpc-go's default of 120 s, 20,000 of them (no byte sent) held
// every file descriptor of the daemon, and every listener refused or
// stalled other clients, for as long as 170 connections a second came.
const HandshakeTimeout = 10 * time.Second

// ServerOptions returns the codec and interceptor chains of e. Requests
// with compressed messages are refused (RefuseCompressedRequests).
func (e Edge) ServerOptions() []grpc.ServerOption {
	RefuseCompressedRequests()
	codec := newRequestCodec()
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	if e.Recv != nil { // outermost: it sees each answer as sent
		u, s := e.Recv.interceptors()
		unary, stream = append(unary, u), append(stream, s)
	}
	if e.RecvTimeout > 0 {
		u, s := arrivalInterceptors()
		unary, stream = append(unary, u), append(stream, s)
	}
	denied := func(string, codes.Code) {}
	if e.Metrics != nil {
		u, s := e.Metrics.interceptors()
		unary, stream = append(unary, u), append(stream, s)
		denied = e.Metrics.denied
		if e.Admission != nil {
			e.Admission.rejected = func(method string) { e.Metrics.rejected.WithLabelValues(method).Inc() }
			e.Admission.waited = func(d time.Duration) { e.Metrics.admitWait.Observe(d.Seconds()) }
			e.Admission.answered = func(d time.Duration) { e.Metrics.admitted.Observe(d.Seconds()) }
		}
	}
	u, s := Interceptors(e.Log, e.Stats, e.Timeout)
	unary, stream = append(unary, u), append(stream, s)
	u, s = codec.interceptors(e.chargeBody)
	unary, stream = append(unary, u), append(stream, s)
	u, s = e.Auth.interceptors(denied)
	unary, stream = append(unary, u), append(stream, s)
	unary = append(unary, e.Admission.unary())
	stream = append(stream, e.Admission.boundReflection, e.Admission.admitStreamSetup)
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.StatsHandler(codecCalls{codec, e.chargeBody}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.ConnectionTimeout(HandshakeTimeout),
	}
	var in tap.ServerInHandle
	if e.Auth.Tokens != nil || e.Auth.ClientCerts {
		in = e.Auth.tap(denied)
	}
	if e.BodyRate != nil || e.BadBodies != nil {
		in = e.bodyTap(in)
	}
	if e.Admission != nil { // after authentication: UNAUTHENTICATED goes first
		in = e.Admission.tap(in, e.Auth.tapCaller)
		opts = append(opts, grpc.StatsHandler(dispatchClock{e.Admission}))
	}
	if e.RecvTimeout > 0 {
		in = arrivalTap(e.RecvTimeout, in)
	}
	if e.Recv != nil { // last: a call is counted only once every other tap let it in
		e.Recv.who = e.Auth.tapCaller
		// The streams a connection's client may be sending on at once
		// (unread.go): twice grpc-go's bound, for the streams it has
		// ended and the writes' scan not yet seen.
		e.Recv.recvTimeout = e.RecvTimeout
		e.Recv.openStreams = max(rapidreset.MaxOpenStreams, 2*int(e.MaxConcurrentStreams))
		if e.MaxConcurrentStreams == 0 {
			e.Recv.openStreams = 1 << 16
		}
		e.Recv.waiting.byPeer = map[string]*waitingOf{}
		if e.Auth.Tokens != nil || e.Auth.ClientCerts {
			e.Recv.waiting.anon = MaxWaitingAnonymous
		}
		in = e.Recv.Tap(in)
		opts = append(opts, e.Recv.ServerOption(), e.Recv.ResetOption())
	}
	if in != nil {
		if e.RecvTimeout > 0 {
			in = releaseRefused(in)
		}
		if e.Recv != nil {
			in = e.Recv.refuseHeld(in)
		}
		opts = append(opts, grpc.InTapHandle(in))
	}
	if e.MaxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(e.MaxConcurrentStreams))
	}
	return opts
}

// MaxReflectionRequests bounds the requests one reflection stream
// (ServerReflectionInfo) answers: a stream answered any number (the
// thirteenth hostile pass: 34,534 requests of 40 bytes, 13 KB answered
// each, 392 MB in 30 s and 17.5 s of the daemon's CPU on one stream).
// A tool such as grpcurl asks a few dozen.
const MaxReflectionRequests = 1024

// Each identity may make ReflectionRequestsPerSecond reflection requests
// a second, after a burst of ReflectionRequestBurst, over all its
// streams; past that a stream's next request ends it RESOURCE_EXHAUSTED.
// Admitted as they are, requests on streams opened one after another
// still got 17,000-22,000 answers in 15 s (260-330 MB), the daemon 4.4-4.8
// times the client's CPU (the re-run of the seventeenth hostile pass's
// probe): admission keeps another identity's share, not the daemon's
// CPU. grpcurl's list and describe of every service ask a few dozen.
const (
	ReflectionRequestsPerSecond = 20
	ReflectionRequestBurst      = 256
	// maxReflectionBuckets bounds the identities whose reflection
	// requests are counted; past it they all start afresh.
	maxReflectionBuckets = 4096
)

// reflectionAllowed reports whether ctx's caller may make one more
// reflection request now (ReflectionRequestsPerSecond).
func (a *Admission) reflectionAllowed(ctx context.Context) bool {
	key, _ := a.callerFlow(ctx)
	a.reflMu.Lock()
	defer a.reflMu.Unlock()
	return a.reflection.get(key).AllowN(a.now(), 1)
}

// boundReflection ends a reflection stream past MaxReflectionRequests
// requests with RESOURCE_EXHAUSTED, and admits each request, from its
// reading to its answer's sending, as one of a's AdmitCPU calls under
// the stream's caller (nil a: not admitted). Opening another stream
// cost nothing: 4 streams at once took the daemon 15-17 s of CPU in 15 s
// against the client's 2 and another identity's Route p50 from 2.8 to
// 12.3 ms (the seventeenth hostile pass).
func (a *Admission) boundReflection(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !strings.HasPrefix(info.FullMethod, "/grpc.reflection.") {
		return handler(srv, ss)
	}
	if a != nil {
		key, _ := a.callerFlow(ss.Context())
		if !a.openReflection(key) {
			return errReflectionStreams
		}
		defer a.closeReflection(key)
	}
	rs := &reflectionStream{ServerStream: ss, a: a, method: info.FullMethod}
	defer rs.release()
	return handler(srv, rs)
}

// MaxReflectionStreamsPerCaller bounds the reflection streams one
// identity has open at once: a request's answer is sent outside its
// admission place (reflectionStream.SendMsg), so a client that opens no
// flow-control window keeps a stream's answers, its partial next request
// and its goroutines until --write-stall-timeout; 16 identities × 64
// such streams held +184 MB (the thirty-fourth hostile pass). grpcurl
// opens one.
const MaxReflectionStreamsPerCaller = 4

var errReflectionStreams = status.Errorf(codes.ResourceExhausted, "more than %d reflection streams open by this caller: close one", MaxReflectionStreamsPerCaller)

// openReflection counts a reflection stream of key's, false past
// MaxReflectionStreamsPerCaller (nothing counted).
func (a *Admission) openReflection(key string) bool {
	a.reflMu.Lock()
	defer a.reflMu.Unlock()
	if a.reflOpen[key] >= MaxReflectionStreamsPerCaller {
		return false
	}
	if a.reflOpen == nil {
		a.reflOpen = map[string]int{}
	}
	a.reflOpen[key]++
	return true
}

func (a *Admission) closeReflection(key string) {
	a.reflMu.Lock()
	defer a.reflMu.Unlock()
	if a.reflOpen[key]--; a.reflOpen[key] <= 0 {
		delete(a.reflOpen, key)
	}
}

var errReflectionRate = status.Errorf(codes.ResourceExhausted, "more than %d reflection requests a second by this caller: retry later", ReflectionRequestsPerSecond)

type reflectionStream struct {
	grpc.ServerStream
	a      *Admission
	method string
	n      int
	held   func() // the admission of the request being answered
}

func (s *reflectionStream) release() {
	if s.held != nil {
		s.held()
		s.held = nil
	}
}

func (s *reflectionStream) RecvMsg(m any) error {
	s.release()
	if s.n++; s.n > MaxReflectionRequests {
		return status.Errorf(codes.ResourceExhausted, "at most %d reflection requests on one stream: open another", MaxReflectionRequests)
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.a != nil {
		if !s.a.reflectionAllowed(s.Context()) {
			return errReflectionRate
		}
		_, release, err := s.a.AdmitCPU(s.Context(), s.method)
		if err != nil {
			return err
		}
		s.held = release
	}
	return nil
}

// SendMsg gives the request's admission back before the answer is
// sent: sending waits for the client's flow-control window, and a client
// that opens none held its place for as long as it liked (the
// thirty-third hostile pass: two identities' reflection streams with a
// window of 0 took every long place, and another identity's Route timed
// out). The answer is made by then; setupStream does the same.
func (s *reflectionStream) SendMsg(m any) error {
	s.release()
	return s.ServerStream.SendMsg(m)
}

// setupAdmittedStreams are the server streams whose setup (until their
// headers or first message, or their end) is admitted as an AdmitCPU
// call: outside admission, one identity's 32 loops of WatchExposure on a
// missing session got 100,805 NOT_FOUND answers in 15 s, never refused,
// and another's Route p99 from 8.2 to 21.9 ms (the seventeenth hostile
// pass). A watch then runs outside its place: it mostly waits.
var setupAdmittedStreams = map[string]bool{
	"/classifier.v1.ClassifierService/WatchExposure": true,
}

// Each identity may have FailedSetupsPerSecond setups of
// setupAdmittedStreams' streams fail a second (a watch of a session that
// does not exist or is not its own, or any error before the stream's
// headers), after a burst of FailedSetupBurst; past that its next setup
// is refused RESOURCE_EXHAUSTED before it is tried, as the admission
// refuses: at the gRPC tap, before --http-listen transcodes it, and by
// the interceptor, each counted as the caller's other refusals (past
// AdmissionRefusalsPerSecond: marked, so an HTTP/1.1 answer closes its
// connection). A NOT_FOUND is no refusal, so the admission's setup
// place alone slowed nothing: 32 loops watching a missing session got
// 72,000-90,000 NOT_FOUND in 15 s, the daemon 1.7-2.0 times the client's
// CPU (the seventeenth hostile pass and its re-run). A hub that watches
// sessions as they end, or re-watches all its sessions on reconnecting,
// fails a few: the burst is for that.
const (
	FailedSetupsPerSecond = 20
	FailedSetupBurst      = 256
	// maxFailedSetupBuckets bounds the identities whose failed setups
	// are counted; past it they all start afresh.
	maxFailedSetupBuckets = 4096
)

// A setup running holds a place in its identity's bucket from its
// admission to its outcome (reserveSetup, settleSetup): the room left is
// the bucket's tokens less the setups in flight, as if each of them
// failed. The bucket was only looked at before and counted after, so
// setups queued for their places all passed it before any of them had
// failed: the nineteenth hostile pass (512 concurrent loops) got 815
// NOT_FOUND in 15 s where 256 + 20 × 15 = 556 were meant. A setup that
// succeeds gives its place back at its headers or first message, so
// only setups running at once (each within an admission place) hold
// one: an honest hub's concurrent watches are not held back by it.

// setupRoomLocked is how many more of key's setups may fail at now:
// its bucket's tokens less its setups in flight. a.setupMu is held.
func (a *Admission) setupRoomLocked(key string, now time.Time) float64 {
	var tokens float64 = FailedSetupBurst
	if l := a.failedSetups.lookup(key); l != nil {
		tokens = l.TokensAt(now)
	}
	return tokens - float64(a.setupsInFlight[key])
}

// reserveSetup takes a place in key's bucket for a setup about to run,
// when there is room for it to fail; else it returns the room left.
func (a *Admission) reserveSetup(key string, now time.Time) (float64, bool) {
	a.setupMu.Lock()
	defer a.setupMu.Unlock()
	room := a.setupRoomLocked(key, now)
	if room < 1 {
		return room, false
	}
	if a.setupsInFlight == nil {
		a.setupsInFlight = map[string]int{}
	}
	a.setupsInFlight[key]++
	return room, true
}

// settleSetup gives back the place of one of key's setups in flight,
// counting it in key's bucket if it failed.
func (a *Admission) settleSetup(key string, failed bool) {
	now := a.now()
	a.setupMu.Lock()
	defer a.setupMu.Unlock()
	if n := a.setupsInFlight[key]; n > 1 {
		a.setupsInFlight[key] = n - 1
	} else {
		delete(a.setupsInFlight, key)
	}
	if failed {
		a.failedSetups.get(key).AllowN(now, 1)
	}
}

// setupRefused returns the refusal of a setup of method by caller c at
// now when c's failed setups (and setups in flight) are past
// FailedSetupsPerSecond (nil: none, or method is not one of
// setupAdmittedStreams), counting it as a refusal of c. With try, it
// never waits for the scheduler's lock (the tap: a connection's reader):
// when that is taken the refusal is not counted against the caller's
// refusal rate.
func (a *Admission) setupRefused(ctx context.Context, c Caller, method string, now time.Time, try bool) error {
	if a == nil || !setupAdmittedStreams[method] {
		return nil
	}
	key, _ := a.flowOf(c)
	a.setupMu.Lock()
	room := a.setupRoomLocked(key, now)
	a.setupMu.Unlock()
	if room >= 1 {
		return nil
	}
	return a.refuseSetup(ctx, key, method, room, now, try)
}

// refuseSetup is the refusal of a setup of method by key with room left
// in its bucket, counted as a refusal of key's (setupRefused).
func (a *Admission) refuseSetup(ctx context.Context, key, method string, room float64, now time.Time, try bool) error {
	a.rejected(method)
	err := refusal(fmt.Sprintf("more than %d failed stream setups a second by this caller", FailedSetupsPerSecond),
		time.Duration((1-room)/FailedSetupsPerSecond*float64(time.Second)))
	if try {
		if !a.mu.TryLock() {
			return err
		}
	} else {
		a.mu.Lock()
	}
	past := a.refusedLocked(key, now)
	a.mu.Unlock()
	a.pastRate(ctx, past)
	return err
}

// admitStreamSetup admits the setup of setupAdmittedStreams' streams
// under their caller's share (nil a: not admitted), refuses it when its
// caller's failed setups are past their rate (setupRefused, and again
// once admitted: reserveSetup, which holds a place in the caller's
// bucket while it runs), and counts it failed when it ends in an error
// before its headers or first message.
func (a *Admission) admitStreamSetup(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if a == nil || !setupAdmittedStreams[info.FullMethod] {
		return handler(srv, ss)
	}
	if err := a.setupRefused(ss.Context(), CallerFrom(ss.Context()), info.FullMethod, a.now(), false); err != nil {
		return err
	}
	ctx, release, err := a.AdmitCPU(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	key, _ := a.callerFlow(ctx)
	if room, ok := a.reserveSetup(key, a.now()); !ok {
		// Others of the caller's setups failed, or are running, while
		// this one waited for its place.
		release()
		return a.refuseSetup(ctx, key, info.FullMethod, room, a.now(), false)
	}
	st := &setupStream{ServerStream: ss, ctx: ctx, release: release, settle: func(failed bool) { a.settleSetup(key, failed) }}
	failed := true // a handler that panics failed
	defer func() {
		st.settled.Do(func() { st.settle(failed && !st.set.Load()) })
		st.end()
	}()
	err = handler(srv, st)
	failed = err != nil
	return err
}

// setupStream gives its admission back at its headers, its first
// message or its end, whichever comes first; set records that its
// headers or a message were sent (its setup succeeded), and settle is
// called once with its outcome: at its headers or first message (not
// failed), or at its end.
type setupStream struct {
	grpc.ServerStream
	ctx     context.Context
	once    sync.Once
	release func()
	set     atomic.Bool
	settled sync.Once
	settle  func(failed bool)
}

func (s *setupStream) end()                     { s.once.Do(s.release) }
func (s *setupStream) Context() context.Context { return s.ctx }

func (s *setupStream) succeeded() {
	s.set.Store(true)
	s.settled.Do(func() { s.settle(false) })
	s.end()
}

func (s *setupStream) SendHeader(md metadata.MD) error {
	s.succeeded()
	return s.ServerStream.SendHeader(md)
}

func (s *setupStream) SendMsg(m any) error {
	s.succeeded()
	return s.ServerStream.SendMsg(m)
}
