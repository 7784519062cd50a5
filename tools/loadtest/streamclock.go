package main

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// streamClock is a client stats handler that times where an attempt's
// time goes outside the daemon: from its start (stats.Begin) to its
// headers handed to the connection (stats.OutHeader), which includes
// waiting for one of the connection's HTTP/2 streams (the daemon's
// --max-concurrent-streams per connection; the rest of a connection's
// calls queue in the client); how many attempts ended without ever having
// been sent; and, of the refused attempts, the time from their headers out
// to their answer read by the connection's reader goroutine
// (stats.InTrailer: the way there and back and the daemon's work) and
// from then to the caller's goroutine running again (stats.End).
type streamClock struct {
	mu      sync.Mutex
	waits   []time.Duration // Begin to OutHeader, of attempts sent
	unsent  int             // attempts that ended before their headers went
	attempt int             // attempts that ended
	// Of refused attempts: OutHeader to InTrailer, InTrailer to End.
	refTrip, refWake []time.Duration
}

type clockKey struct{}

type attemptTimes struct{ begin, out, in time.Time }

// clockView is what a streamClock saw between two reset calls.
type clockView struct {
	sendP99ms float64 // p99 of Begin to OutHeader
	unsent    int
	attempts  int
	// p99 of a refused attempt's headers out to its answer read, and of
	// its answer read to its caller running.
	refTripP99ms, refWakeP99ms float64
}

func (c *streamClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits, c.unsent, c.attempt, c.refTrip, c.refWake = nil, 0, 0, nil, nil
}

func (c *streamClock) view() clockView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return clockView{sendP99ms: ms(quantile(c.waits, 0.99)), unsent: c.unsent, attempts: c.attempt,
		refTripP99ms: ms(quantile(c.refTrip, 0.99)), refWakeP99ms: ms(quantile(c.refWake, 0.99))}
}

func (c *streamClock) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, clockKey{}, &attemptTimes{})
}

func (c *streamClock) HandleRPC(ctx context.Context, s stats.RPCStats) {
	t, _ := ctx.Value(clockKey{}).(*attemptTimes)
	if t == nil {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		t.begin = s.BeginTime
	case *stats.OutHeader:
		t.out = time.Now()
	case *stats.InTrailer:
		t.in = time.Now()
	case *stats.End:
		c.mu.Lock()
		if status.Code(s.Error) == codes.ResourceExhausted && !t.out.IsZero() && !t.in.IsZero() {
			c.refTrip = append(c.refTrip, t.in.Sub(t.out))
			c.refWake = append(c.refWake, s.EndTime.Sub(t.in))
		}
		c.attempt++
		if t.out.IsZero() {
			c.unsent++
		} else {
			c.waits = append(c.waits, t.out.Sub(t.begin))
		}
		c.mu.Unlock()
	}
}

func (c *streamClock) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (c *streamClock) HandleConn(context.Context, stats.ConnStats) {}
