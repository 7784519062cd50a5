package server

import (
	"container/list"
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"golang.org/x/time/rate"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// RecvBudget is the process-wide bound on request bytes being received,
// shared with the HTTP listeners (httpguard.Budget): Charge counts n bytes
// who has read and reports whether who must give back what it holds
// (it is over its share while the budget is full); Release gives bytes
// back.
type RecvBudget interface {
	Charge(who string, n int64) bool
	Release(who string, n int64)
}

// MaxWaitingPerCaller bounds the gRPC calls one caller (a token's or
// certificate's identity, or without one the peer's host) may have
// waiting for their request message, from their headers: past it a call
// is refused RESOURCE_EXHAUSTED at once. Without it a call that sent its
// headers and no message cost nothing in the body budget and was held
// until --recv-timeout: in the tenth hostile pass 1,000 connections × 64
// health Checks with no token and no message held 67,022 goroutines, RSS
// 226 → 1,097 MB, renewable every 10 s; with any token, as many calls of
// any method. The calls are counted apart from the body budget: charged
// to it, 20 peers without a token filled it and refused every identity's
// calls, and a hog's bodies filling it refused another's small calls.
// MaxWaitingAnonymous bounds the calls with no identity all peers
// together, when authentication is on (only health checks pass without
// it), so that many peers cannot add up either.
const (
	MaxWaitingPerCaller = 256
	MaxWaitingAnonymous = 1024
)

// StaleWaitingCall: a caller refused for MaxWaitingPerCaller (or
// MaxWaitingAnonymous) counts that refusal as an early reset only when
// its oldest call waiting for its message has waited this long. A gRPC
// client sends a unary call's message with its headers: its calls wait
// only for the daemon to start them, which takes longer than their
// answer only on a saturated daemon, and that briefly (tens to a few
// hundred milliseconds: make loadtest's dispatch delays). In make
// loadtest every such refusal of the one local identity counted (its
// 1,000-2,000 clients had more than 256 calls between their headers and
// their goroutine), so its connections were closed by the early-reset
// rule and its new ones held back: Unavailable. A client that parks
// calls without their message (held until --recv-timeout) to flood more
// headers past the cap, uncounted, is counted once its parked calls are
// this old (the eleventh hostile pass's rapid resets, refused by the
// cap, were most of its cost).
const StaleWaitingCall = 2 * time.Second

// waitingCalls counts the calls waiting for their message, per caller and
// those with no identity in all, and when each caller's began waiting.
type waitingCalls struct {
	mu     sync.Mutex
	anon   int // 0: no bound on the calls with no identity in all
	nAnon  int
	byPeer map[string]*waitingOf
}

// waitingOf is one caller's calls waiting for their message, in the
// order they began (the front is the oldest).
type waitingOf struct{ since list.List } // of time.Time

// take counts a call of who waiting from now, or reports false past the
// caller's bound (or the anonymous callers' together), with whether the
// caller's oldest call waiting has waited StaleWaitingCall (stale). el
// is the call's entry, for give.
func (w *waitingCalls) take(who string, anonymous bool, now time.Time) (el *list.Element, ok, stale bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.byPeer[who]
	if o == nil {
		o = &waitingOf{}
	}
	if o.since.Len() >= MaxWaitingPerCaller || (anonymous && w.anon > 0 && w.nAnon >= w.anon) {
		front := o.since.Front()
		return nil, false, front != nil && now.Sub(front.Value.(time.Time)) >= StaleWaitingCall
	}
	w.byPeer[who] = o
	if anonymous {
		w.nAnon++
	}
	return o.since.PushBack(now), true, false
}

func (w *waitingCalls) give(who string, anonymous bool, el *list.Element) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if anonymous {
		w.nAnon--
	}
	if o := w.byPeer[who]; o != nil {
		o.since.Remove(el)
		if o.since.Len() == 0 {
			delete(w.byPeer, who)
		}
	}
}

// errRecvCalls refuses a call whose caller has its share of calls
// waiting for their message.
var errRecvCalls = status.Error(codes.ResourceExhausted, "too many calls waiting for their request message: send each call's message with its headers, or retry later")

// errRecvBudget is the cause of a call ended because its connection held
// more than its share of the request bytes in flight.
var errRecvBudget = errors.New("too many request bytes in flight (--max-body-bytes-in-flight): this connection held more than its share")

// RecvGuard counts the bytes a gRPC connection reads while it has calls
// whose request message has not yet arrived, against a RecvBudget.
// gRPC assembles a message from its data frames as they arrive (and
// replenishes the flow-control windows as it does), so each call can hold
// up to --max-recv-bytes and their sum was unbounded: 4 connections of 64
// calls each holding 3.9 MB raised the heap by 0.9 GB. When a read puts
// the budget over its total and the connection holds more than its fair
// share (the total divided among the holders on every listener), every
// call of that connection still receiving is ended (CANCELLED), which
// frees what they held; a connection under its share reads on, so small
// calls keep working while a hog is cut.
//
// Listener wraps the gRPC listener; ServerOption and Tap wire the calls.
type RecvGuard struct {
	b   RecvBudget
	seq atomic.Int64
	// who is the caller of a call (Edge sets it from the one the
	// authentication found), whose calls waiting for their message are
	// counted in waiting; nil: they are not.
	who     func(context.Context, *tap.Info) Caller
	waiting waitingCalls
	// StallTimeout closes a connection that owed answers for this long
	// and wrote fewer than StallProgressBytes of them (0: never): an
	// emulated write deadline (--write-stall-timeout).
	StallTimeout time.Duration
	unread       unreadBytes
	stalled      atomic.Int64
	// resetCloses counts the connections closed for early resets;
	// peers, each peer's early resets (resets.go).
	resetCloses atomic.Int64
	// unreadBytes counts the DATA bytes of every connection read by no
	// call (unread.go).
	unreadBytes atomic.Int64
	// openStreams bounds the streams a connection's client may be
	// sending on (rapidreset.Streams.Max; set by Edge); recvTimeout is
	// --recv-timeout (0: none), for the messages of a stream after its
	// first (streamed.go).
	openStreams int
	recvTimeout time.Duration
	peers       *rapidreset.Peers
	// health bounds each peer's health checks (healthCheck);
	// healthCloses counts the connections closed past them.
	health       peerBuckets
	healthCloses atomic.Int64
	// now is the health checks' clock (nil: time.Now).
	now func() time.Time
}

// NewRecvGuard counts against b.
func NewRecvGuard(b RecvBudget) *RecvGuard { return &RecvGuard{b: b, peers: rapidreset.New()} }

// Listener wraps lis so that its connections count what they read, and
// holds back the new connections of peers the early-reset rule penalizes
// (tarpit.go).
func (g *RecvGuard) Listener(lis net.Listener) net.Listener {
	return g.peers.Listener(lis, g.wrap)
}

// wrap counts c, accepted with its early-reset count n.
func (g *RecvGuard) wrap(c net.Conn, n *rapidreset.Conn) net.Conn {
	rc := &recvConn{Conn: c, g: g, who: "grpc-conn:" + strconv.FormatInt(g.seq.Add(1), 10), peer: n.Peer, resets: n, gone: make(chan struct{})}
	rc.addr = recvAddr{Addr: c.RemoteAddr(), c: rc}
	rc.gate.blocks.Streams, rc.writes.Streams, rc.streams.Max = &rc.streams, &rc.streams, g.openStreams
	return rc
}

// recvAddr is a counted connection's remote address: gRPC hands it to
// the stats handler's TagConn, which finds the connection by it.
type recvAddr struct {
	net.Addr
	c *recvConn
}

// recvConn is a connection of the gRPC listener counting what it reads.
type recvConn struct {
	net.Conn
	g    *RecvGuard
	who  string
	addr recvAddr
	// peer is who the early-reset rule counts the connection's calls to
	// (rapidreset.PeerOf); resets, the connection's count (nil in unit
	// tests: made by the stats handler).
	peer   netip.Addr
	resets *rapidreset.Conn
	// healthOwn is the connection's own bucket of health checks,
	// healthRefused its checks refused since healthSince (within
	// HealthRefusalWindow, under healthMu), healthFlood whether it was
	// closed for them (resets.go).
	healthOnce    sync.Once
	healthOwn     *rate.Limiter
	healthMu      sync.Mutex
	healthSince   time.Time
	healthRefused int
	healthFlood   atomic.Bool

	mu sync.Mutex
	// read is every byte the connection has read. What it holds for
	// calls still receiving is at most what it read since the oldest of
	// them started (held, charged to who): the frames of calls that
	// started later, or ended meanwhile, are within it, and nothing
	// before it is still held. Counting from the last moment no call was
	// receiving instead made a busy connection (one always receiving
	// something) hold everything it ever read: a hog's answered 250 KB
	// Routes added up past its share and ended the calls of another
	// identity sharing its connection.
	read, held int64
	receiving  list.List // *recvCall, oldest first
	closed     bool

	// gate counts the streams the client opens (frames.go), used by the
	// reader's goroutine alone; untapped, those counted as early
	// resets for reaching no tap; tapped, those the taps saw; viaTLS,
	// that frameConn scans the deciphered bytes instead.
	gate     frameGate
	untapped int64
	tapped   atomic.Int64
	viaTLS   atomic.Bool
	// streams is the streams the server accepted whose client is still
	// sending (unread.go): the reader accepts the stream of each block
	// the taps let in (refusedTaps counts those they refused; decided,
	// seenTapped and seenRefused are the reader's), the scanners of what
	// the client sends and the server writes (writes, under wmu) end
	// them, and the DATA on any other stream is read by no call: paid,
	// unreadPaid of it so far, out of the peer's rate of such bytes.
	streams                          rapidreset.Streams
	refusedTaps                      atomic.Int64
	decided, seenTapped, seenRefused int64
	unreadPaid                       int64
	wmu                              sync.Mutex
	writes                           rapidreset.H2Writes
	// lastTapped is the call the taps let in last (the reader's), given
	// its stream at the next read; streamed, the calls of methods taking
	// a stream of messages past their first (under smu, streamed.go).
	lastTapped *recvCall
	smu        sync.Mutex
	streamed   map[*recvCall]struct{}
	// budget holds the client's cheap frames to their rate
	// (rapidreset.FrameBudget), used by the reader alone, credited with
	// the calls tapped and the bytes written (wrote); gone is closed with
	// the connection, ending a wait.
	budget   rapidreset.FrameBudget
	wrote    atomic.Int64
	gone     chan struct{}
	goneOnce sync.Once

	// owed is the answers handed to the transport not yet all written
	// (*owedAnswer, oldest first); stall checks, from stallFrom, that
	// stallPaid of them were written (unread.go).
	owed      list.List
	stall     *time.Timer
	stallFrom time.Time
	stallPaid int64
	// caught is set once the early-reset rule closed the connection: it
	// reads nothing more and its calls are refused (resets.go).
	caught atomic.Bool
}

// recvCall is a call of a counted connection: its request message
// while it arrives, and its answers until they are written.
type recvCall struct {
	cancel context.CancelCauseFunc
	from   int64 // recvConn.read when it started
	el     *list.Element
	// release gives back the call's place in waitingCalls (once); nil
	// if it took none.
	release func()
	// owner is the caller its answers are counted to (unreadBytes);
	// answers, those it handed to the transport not yet written.
	owner   string
	answers []*owedAnswer
	// clientStream: the method takes a stream of messages (stats.Begin),
	// so each is in once gRPC hands it on (InPayload); a call of any
	// other method receives until its handler starts (interceptors), for
	// gRPC reads on after its message, to refuse a second one.
	clientStream atomic.Bool
	// finished: its stream is gone (under recvConn.mu).
	finished bool
	// stream is its HTTP/2 stream (0: not known), delivered the wire
	// bytes of the messages gRPC handed on, bufCharged what of its
	// stream's bytes not yet handed on is charged to the budget, and
	// bufTimer the receive timer of a message begun (streamed.go; the
	// last two under recvConn.smu).
	stream     atomic.Uint32
	delivered  atomic.Int64
	bufCharged int64
	bufTimer   *time.Timer
}

func (c *recvConn) RemoteAddr() net.Addr { return c.addr }

func (c *recvConn) Write(p []byte) (int, error) {
	if !c.viaTLS.Load() {
		c.scanWrites(p) // before it is sent (frameConn.Write)
	}
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.paid(int64(n))
		c.wrote.Add(int64(n))
	}
	return n, err
}

// scanWrites reads the frames the server writes (in plaintext), ending
// the streams it ends (unread.go).
func (c *recvConn) scanWrites(p []byte) {
	c.wmu.Lock()
	c.writes.Feed(p)
	c.wmu.Unlock()
}

func (c *recvConn) Read(p []byte) (int, error) {
	if c.caught.Load() { // resets.go
		return 0, net.ErrClosed
	}
	var n int
	var err error
	if c.viaTLS.Load() {
		n, err = c.Conn.Read(p) // frameConn gates what TLS deciphers
	} else if n, err = c.readCounted(c.Conn, p); errors.Is(err, net.ErrClosed) && c.caught.Load() {
		return n, err
	}
	if n > 0 {
		c.mu.Lock()
		c.read += int64(n)
		if c.receiving.Len() > 0 {
			c.held += int64(n)
			if c.g.b.Charge(c.who, int64(n)) {
				// The calls stay counted until their streams are gone:
				// what they hold, and the frames still arriving for them,
				// is freed only then.
				for e := c.receiving.Front(); e != nil; e = e.Next() {
					e.Value.(*recvCall).cancel(errRecvBudget)
				}
			}
		}
		c.mu.Unlock()
	}
	return n, err
}

// settleLocked gives back what c no longer holds: what it read before
// its oldest call still receiving started (everything when none is).
func (c *recvConn) settleLocked() {
	held := int64(0)
	if e := c.receiving.Front(); e != nil {
		held = min(c.held, c.read-e.Value.(*recvCall).from)
	}
	if held < c.held {
		c.g.b.Release(c.who, c.held-held)
		c.held = held
	}
}

func (c *recvConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.receiving.Init()
	c.settleLocked()
	c.releaseOwedLocked()
	c.mu.Unlock()
	if c.resets != nil {
		c.resets.Closed()
	}
	c.goneOnce.Do(func() {
		if c.gone != nil {
			close(c.gone)
		}
	})
	return c.Conn.Close()
}

// start registers a call of c receiving its request.
func (c *recvConn) start(call *recvCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && call.el == nil && !call.finished {
		call.from = c.read
		call.el = c.receiving.PushBack(call)
	}
}

// finish: call's stream is gone; it never receives again.
func (c *recvConn) finish(call *recvCall) {
	c.mu.Lock()
	call.finished = true
	c.mu.Unlock()
	c.done(call)
	c.unwatchStreamed(call)
}

// done: call's request arrived, or its stream is gone.
func (c *recvConn) done(call *recvCall) {
	if call.release != nil {
		call.release()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if call.el == nil || c.closed {
		return
	}
	c.receiving.Remove(call.el)
	call.el = nil
	c.settleLocked()
}

// recvCtx is a call's context the guard can end: its parent's error
// first, so that the receive timeout's DEADLINE_EXCEEDED (arrivalCtx) is
// still what a call it ends reports.
type recvCtx struct {
	context.Context
	parent context.Context
}

func (c recvCtx) Err() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	return c.Context.Err()
}

type recvConnKey struct{}
type recvCallKey struct{}

// Tap registers every call of a counted connection as receiving, before
// next; its context ends (CANCELLED) if the guard cuts the connection.
func (g *RecvGuard) Tap(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		stream := ctx // ends when the transport closes the stream
		if next != nil {
			var err error
			if ctx, err = next(ctx, info); err != nil {
				return ctx, err
			}
		}
		c, ok := ctx.Value(recvConnKey{}).(*recvConn)
		if !ok {
			return ctx, nil
		}
		call := &recvCall{}
		if g.who != nil {
			who := g.who(ctx, info)
			owner, anonymous := who.Quota, who.Name == "" || who.Name == Anonymous
			if !anonymous {
				owner = "id:" + who.Name
			}
			if g.unread.over(owner) {
				return ctx, errUnread
			}
			el, ok, stale := g.waiting.take(owner, anonymous, time.Now())
			if !ok {
				// An early reset only when the caller's calls have been
				// waiting for their message long (StaleWaitingCall): a
				// hub's honest calls merely wait for their goroutine.
				if stale {
					resetStats{&g.resetCloses, g.peers}.ended(ctx, true)
				}
				return ctx, errRecvCalls
			}
			call.owner = owner
			call.release = sync.OnceFunc(func() { g.waiting.give(owner, anonymous, el) })
		}
		parent := ctx
		ctx, cancel := context.WithCancelCause(ctx)
		call.cancel = cancel
		c.start(call)
		c.lastTapped = call // its stream is known at the next read (settleAccepted)
		// However the call ends (answered, reset, refused after the
		// tap), its stream's context ends and it no longer receives.
		context.AfterFunc(stream, func() { c.finish(call) })
		return recvCtx{context.WithValue(ctx, recvCallKey{}, call), parent}, nil
	}
}

// ServerOption is the stats handler that finds each connection's count
// and ends each call's receiving.
func (g *RecvGuard) ServerOption() grpc.ServerOption { return grpc.StatsHandler(recvStats{}) }

type recvStats struct{}

func (recvStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if a, ok := info.RemoteAddr.(recvAddr); ok {
		return context.WithValue(ctx, recvConnKey{}, a.c)
	}
	return ctx
}

func (recvStats) HandleConn(context.Context, stats.ConnStats) {}

func (recvStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (recvStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, call, ok := counted(ctx)
	if !ok {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		call.clientStream.Store(s.IsClientStream)
	case *stats.InPayload:
		// A call of a method that takes one message is still receiving:
		// grpc-go reads on until the stream ends, to refuse a second
		// message, and buffers what comes (the thirty-first hostile pass:
		// a second message's prefix declaring a MiB, and its bytes,
		// held by no budget until the receive timeout). One that takes
		// a stream of them is counted by its stream from now on
		// (streamed.go).
		if call.clientStream.Load() {
			call.delivered.Add(int64(s.WireLength))
			c.done(call)
			c.watchStreamed(call)
		}
	case *stats.OutPayload:
		c.queued(call)
	case *stats.End:
		c.done(call)
		c.ended(call)
	}
}
