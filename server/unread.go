package server

import (
	"container/list"
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// MaxUnreadPerCaller bounds the answer bytes of one caller (a token's or
// certificate's identity, or without one the peer's host) handed to the
// gRPC transport and not yet written to its connections: past it a new
// call of the caller is refused RESOURCE_EXHAUSTED from its headers.
// grpc-go has no write deadline: an answer under its 64 KiB per-stream
// write quota is queued on the connection and its handler returns, a
// larger one blocks the handler; either is held for as long as the
// client keeps its HTTP/2 window shut. In the tenth hostile pass a token
// with the route scope opened 100 connections announcing
// SETTINGS_INITIAL_WINDOW_SIZE 0, each with 64 Embed calls, and never
// read: RSS 225 → 712 MB, held past --idle-timeout (300 connections × 64
// ListTools: +893 MB).
const MaxUnreadPerCaller = 16 << 20

// DefaultWriteStallTimeout is --write-stall-timeout's default.
const DefaultWriteStallTimeout = 30 * time.Second

// StallProgressBytes is what a connection with answers unread must
// write of them in each --write-stall-timeout to be kept: a client
// reading slowly but steadily (16 KiB in 30 s is 550 B/s) stays; one
// whose window is shut, or which opens it a few bytes at a time, is
// closed.
const StallProgressBytes = 16 << 10

// errUnread refuses a call whose caller has its share of answers unread.
var errUnread = status.Error(codes.ResourceExhausted, "too many answer bytes not yet read by this caller: read the answers of your calls (their HTTP/2 flow-control windows are shut), or retry later")

// unreadBytes counts the answer bytes not yet written, per caller.
type unreadBytes struct {
	mu      sync.Mutex
	byOwner map[string]int64
	total   int64
}

func (u *unreadBytes) over(owner string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byOwner[owner] >= MaxUnreadPerCaller
}

func (u *unreadBytes) add(owner string, n int64) {
	if n == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byOwner == nil {
		u.byOwner = map[string]int64{}
	}
	u.total += n
	if u.byOwner[owner] += n; u.byOwner[owner] <= 0 {
		delete(u.byOwner, owner)
	}
}

// Unread is the answer bytes of owner ("id:NAME", or the peer's quota
// key when anonymous) not yet written; for tests and metrics.
func (g *RecvGuard) Unread(owner string) int64 {
	g.unread.mu.Lock()
	defer g.unread.mu.Unlock()
	return g.unread.byOwner[owner]
}

// UnreadTotal is the answer bytes of every caller not yet written.
func (g *RecvGuard) UnreadTotal() int64 {
	g.unread.mu.Lock()
	defer g.unread.mu.Unlock()
	return g.unread.total
}

// owedAnswer is an answer message of a call handed (or about to be
// handed) to the transport whose bytes have not all been written.
type owedAnswer struct {
	n      int64 // bytes not yet written
	owner  string
	queued bool // the transport took it (stats.OutPayload)
	call   *recvCall
	el     *list.Element // in recvConn.owed; nil once written or dropped
}

// The connection's side: what it owes (answers handed to the transport,
// oldest first) and what it wrote. The transport writes the streams'
// frames in its own order, but bytes are bytes: a write pays the oldest
// answers first, so what is still owed in all is what was handed less
// what was written, whichever streams it was on. The frames' own bytes
// (HTTP/2 and TLS headers) pay too, so what is owed is if anything
// under-counted; a write finding nothing owed is not kept as credit.

// owe records n answer bytes of call, before the transport takes them;
// the returned answer is then confirmed (queued) or dropped.
func (c *recvConn) owe(call *recvCall, n int64) *owedAnswer {
	a := &owedAnswer{n: n, owner: call.owner, call: call}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return a
	}
	if c.owed.Len() == 0 {
		c.stallFrom, c.stallPaid = time.Now(), 0
		if c.g.StallTimeout > 0 && c.stall == nil {
			c.stall = time.AfterFunc(c.g.StallTimeout, c.checkStall)
		}
	}
	a.el = c.owed.PushBack(a)
	call.answers = append(call.answers, a)
	c.g.unread.add(a.owner, n)
	return a
}

// queued: the transport took call's oldest answer not yet confirmed
// (its size is the estimate's: proto's codec, no compression).
func (c *recvConn) queued(call *recvCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range call.answers {
		if !a.queued {
			a.queued = true
			return
		}
	}
}

// ended: call is over; answers the transport never took will never be
// written.
func (c *recvConn) ended(call *recvCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range call.answers {
		if !a.queued && a.el != nil {
			c.dropLocked(a)
		}
	}
	call.answers = nil
}

func (c *recvConn) dropLocked(a *owedAnswer) {
	c.owed.Remove(a.el)
	a.el = nil
	c.g.unread.add(a.owner, -a.n)
	a.n = 0
}

// paid: n bytes were written to the connection.
func (c *recvConn) paid(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n > 0 {
		e := c.owed.Front()
		if e == nil {
			return
		}
		a := e.Value.(*owedAnswer)
		take := min(n, a.n)
		a.n -= take
		n -= take
		c.stallPaid += take
		c.g.unread.add(a.owner, -take)
		if a.n == 0 {
			c.owed.Remove(e)
			a.el = nil
		}
	}
}

// checkStall closes c if it owed answers for the whole of the last
// StallTimeout and wrote fewer than StallProgressBytes of them: its
// client is not reading them, and closing the connection is what frees
// them (grpc-go has no write deadline; this is one).
func (c *recvConn) checkStall() {
	c.mu.Lock()
	if c.closed || c.owed.Len() == 0 {
		c.stall = nil
		c.mu.Unlock()
		return
	}
	if left := c.g.StallTimeout - time.Since(c.stallFrom); left > 0 {
		c.stall.Reset(left)
		c.mu.Unlock()
		return
	}
	if c.stallPaid >= StallProgressBytes {
		c.stallFrom, c.stallPaid = time.Now(), 0
		c.stall.Reset(c.g.StallTimeout)
		c.mu.Unlock()
		return
	}
	c.stall = nil
	c.mu.Unlock()
	c.g.stalled.Add(1)
	_ = c.Close()
}

// releaseOwedLocked gives back what c owes: it is closed.
func (c *recvConn) releaseOwedLocked() {
	for e := c.owed.Front(); e != nil; e = e.Next() {
		a := e.Value.(*owedAnswer)
		a.el = nil
		c.g.unread.add(a.owner, -a.n)
		a.n = 0
	}
	c.owed.Init()
	if c.stall != nil {
		c.stall.Stop()
		c.stall = nil
	}
}

// StalledClosed is how many connections were closed for not reading
// their answers (--write-stall-timeout).
func (g *RecvGuard) StalledClosed() int64 { return g.stalled.Load() }

// answerSize is what a gRPC message of m takes on the wire, its 5-byte
// prefix with it (the codec is proto's, and answers are not compressed).
func answerSize(m any) int64 {
	if p, ok := m.(proto.Message); ok {
		return int64(proto.Size(p)) + 5
	}
	return 5
}

// interceptors record each answer as owed before gRPC hands it to the
// transport, so that no write of it can come first; outermost, they see
// the answer as sent.
func (g *RecvGuard) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		c, call, counted := counted(ctx)
		if counted {
			c.done(call) // its request is in, and nothing after it
		}
		resp, err := h(ctx, req)
		if err == nil && resp != nil && counted {
			c.owe(call, answerSize(resp))
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if c, call, ok := counted(ss.Context()); ok {
			ss = owingStream{ss, c, call}
		}
		return h(srv, ss)
	}
	return unary, stream
}

func counted(ctx context.Context) (*recvConn, *recvCall, bool) {
	c, ok := ctx.Value(recvConnKey{}).(*recvConn)
	call, ok2 := ctx.Value(recvCallKey{}).(*recvCall)
	return c, call, ok && ok2
}

type owingStream struct {
	grpc.ServerStream
	c    *recvConn
	call *recvCall
}

// RecvMsg: once gRPC hands on a message (of a method that takes one:
// with the end of the stream after it), the call no longer receives. A
// call of a method that takes a stream of messages has what of its next
// message has arrived held to the body budget by its own stream's count
// (streamed.go).
func (s owingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	s.c.done(s.call)
	return err
}

func (s owingStream) SendMsg(m any) error {
	s.c.owe(s.call, answerSize(m))
	return s.ServerStream.SendMsg(m)
}
