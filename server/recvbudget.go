package server

import (
	"container/list"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

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
	// Take counts n bytes of who's if they fit in the budget and who's
	// share, and reports whether they did (nothing is counted if not).
	Take(who string, n int64) bool
}

// CallCost is what a gRPC call of an identity is charged, to its share of
// the budget, from its headers until its request message has arrived (or
// its stream ends): its goroutines, stream and headers, whatever it sends.
// The same as an HTTP request's (httpguard.StreamCost). Without it a call
// that sent its headers and no message cost nothing in the budget and was
// held until --recv-timeout: in the tenth hostile pass 1,000 connections ×
// 64 health Checks with no token and no message held 67,022 goroutines,
// RSS 226 → 1,097 MB, renewable every 10 s; with any token, as many calls
// of any method. So an identity has at most its share ÷ CallCost (256 at
// the defaults) calls waiting for their message; past it a call is refused
// RESOURCE_EXHAUSTED from its headers.
//
// Calls with no identity (health checks without a token, every call of a
// daemon without authentication) are not charged to the budget, which
// several peers could then fill and so refuse every identity's calls (20
// loopback addresses did, in the same pass): each peer host has at most
// MaxWaitingPerPeer of them waiting for their message, and with
// authentication on, all peers together MaxWaitingAnonymous.
const CallCost = 64 << 10

// Bounds on calls with no identity waiting for their message (CallCost).
const (
	MaxWaitingPerPeer   = 256
	MaxWaitingAnonymous = 1024
)

// anonCalls counts the calls with no identity waiting for their message,
// per peer host and in all.
type anonCalls struct {
	mu     sync.Mutex
	total  int // 0: no bound in all
	n      int
	byPeer map[string]int
}

func (a *anonCalls) take(peer string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byPeer[peer] >= MaxWaitingPerPeer || (a.total > 0 && a.n >= a.total) {
		return false
	}
	a.byPeer[peer]++
	a.n++
	return true
}

func (a *anonCalls) give(peer string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n--
	if a.byPeer[peer]--; a.byPeer[peer] <= 0 {
		delete(a.byPeer, peer)
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
	// authentication found): an identity's calls are charged CallCost,
	// the others counted in anon; nil: calls are neither.
	who  func(context.Context, *tap.Info) Caller
	anon anonCalls
}

// NewRecvGuard counts against b.
func NewRecvGuard(b RecvBudget) *RecvGuard { return &RecvGuard{b: b} }

// Listener wraps lis so that its connections count what they read.
func (g *RecvGuard) Listener(lis net.Listener) net.Listener { return recvListener{lis, g} }

type recvListener struct {
	net.Listener
	g *RecvGuard
}

func (l recvListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	rc := &recvConn{Conn: c, g: l.g, who: "grpc-conn:" + strconv.FormatInt(l.g.seq.Add(1), 10)}
	rc.addr = recvAddr{Addr: c.RemoteAddr(), c: rc}
	return rc, nil
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
}

// recvCall is a call whose request message has not arrived yet.
type recvCall struct {
	cancel context.CancelCauseFunc
	from   int64 // recvConn.read when it started
	el     *list.Element
	// release gives back the call's CallCost (once); nil if not charged.
	release func()
}

func (c *recvConn) RemoteAddr() net.Addr { return c.addr }

func (c *recvConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
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
	c.mu.Unlock()
	return c.Conn.Close()
}

// start registers a call of c receiving its request.
func (c *recvConn) start(call *recvCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && call.el == nil {
		call.from = c.read
		call.el = c.receiving.PushBack(call)
	}
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
			if who := g.who(ctx, info); who.Name != "" && who.Name != Anonymous {
				owner := "id:" + who.Name // as the HTTP listeners name it: one share
				if !g.b.Take(owner, CallCost) {
					return ctx, errRecvCalls
				}
				call.release = sync.OnceFunc(func() { g.b.Release(owner, CallCost) })
			} else {
				if !g.anon.take(who.Quota) {
					return ctx, errRecvCalls
				}
				call.release = sync.OnceFunc(func() { g.anon.give(who.Quota) })
			}
		}
		parent := ctx
		ctx, cancel := context.WithCancelCause(ctx)
		call.cancel = cancel
		c.start(call)
		// However the call ends (answered, reset, refused after the
		// tap), its stream's context ends and it no longer receives.
		context.AfterFunc(stream, func() { c.done(call) })
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
	switch s.(type) {
	case *stats.InPayload, *stats.End:
	default:
		return
	}
	c, ok := ctx.Value(recvConnKey{}).(*recvConn)
	call, ok2 := ctx.Value(recvCallKey{}).(*recvCall)
	if ok && ok2 {
		c.done(call)
	}
}
