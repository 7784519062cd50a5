// Package sweep is the one loop that keeps the daemon's stores bounded
// when nobody writes to them: it calls a store's clean-up (a sweep of idle
// sessions, a prune of old events) at a steady interval until the context
// ends. The session and terminal stores, in memory, SQLite or Redis, all
// run their upkeep through it.
package sweep

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx is done. fn runs on the
// caller's goroutine, so two calls never overlap and none runs after
// Every returns. report, when not nil, receives the errors of fn that ctx
// did not cause (a cancelled sweep is not a failure); the next tick tries
// again.
func Every(ctx context.Context, every time.Duration, fn func(context.Context) error, report func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			Report(ctx, fn(ctx), report)
		}
	}
}

// Report hands err to report unless err is nil, report is nil, or ctx is
// done (an error a cancelled context caused says nothing about the store).
func Report(ctx context.Context, err error, report func(error)) {
	if err != nil && report != nil && ctx.Err() == nil {
		report(err)
	}
}

// Interval is how often to sweep what expires after ttl idle: a quarter
// of it, at least a second and at most a minute, so an entry outlives its
// ttl by at most a quarter of it (or a minute) and a short ttl does not
// make the loop spin.
func Interval(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Second), time.Minute)
}
