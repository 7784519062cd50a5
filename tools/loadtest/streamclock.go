package main

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/stats"
)

// streamClock is a client stats handler that times where an attempt's
// time goes before the daemon sees it: from its start (stats.Begin) to
// its headers handed to the connection (stats.OutHeader), which includes
// waiting for one of the connection's HTTP/2 streams (the daemon's
// --max-concurrent-streams per connection; the rest of a connection's
// calls queue in the client), and how many attempts ended without ever
// having been sent.
type streamClock struct {
	mu      sync.Mutex
	waits   []time.Duration // Begin to OutHeader, of attempts sent
	unsent  int             // attempts that ended before their headers went
	attempt int             // attempts that ended
}

type clockKey struct{}

type attemptTimes struct{ begin, out time.Time }

// clockView is what a streamClock saw between two reset calls.
type clockView struct {
	sendP99ms float64 // p99 of Begin to OutHeader
	unsent    int
	attempts  int
}

func (c *streamClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits, c.unsent, c.attempt = nil, 0, 0
}

func (c *streamClock) view() clockView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return clockView{sendP99ms: ms(quantile(c.waits, 0.99)), unsent: c.unsent, attempts: c.attempt}
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
	case *stats.End:
		c.mu.Lock()
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
