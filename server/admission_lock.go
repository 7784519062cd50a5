package server

import (
	"context"
	"sync"
	"sync/atomic"
)

// admissionLock is the admission's lock: a mutex that a waiting
// goroutine never owns before it runs again.
//
// sync.Mutex hands itself to its oldest waiter once a waiter has waited
// a millisecond (its starvation mode), and that waiter owns it from then
// until it runs. On a saturated daemon a woken goroutine waits for a Go
// processor behind every goroutine that became runnable before it (each
// new call's goroutine among them), so the mutex sat owned and idle for a
// run-queue cycle per hand-off: short2000's calls waited 450 ms p50 to
// take it, holding it 2 µs each (docs/loadtest.md, "Eleventh pass"), the
// tap's TryLock always failed (a starving mutex is never free), so every
// call went on to a goroutine and the queue, and the oldest calls, whose
// callers had gone, were decided first. Here the lock is only ever taken
// by a running goroutine (TryLock); a waiter is woken by a hint (one per
// Unlock while any wait, in the order they began to wait) and tries
// again, so the runnable goroutines take it in turn, newcomers first,
// and a waiter whose call has ended leaves (LockCtx).
type admissionLock struct {
	mu      sync.Mutex // only TryLock and Unlock: it never starves
	waiting atomic.Int32
	hint    chan struct{} // capacity 1; nil: plain sync.Mutex
}

func newAdmissionLock() admissionLock { return admissionLock{hint: make(chan struct{}, 1)} }

// TryLock takes the lock if it is free.
func (l *admissionLock) TryLock() bool { return l.mu.TryLock() }

// Lock takes the lock, waiting as long as it takes.
func (l *admissionLock) Lock() { _ = l.LockCtx(context.Background()) }

// LockCtx takes the lock, or returns ctx's error once ctx is done
// without it.
func (l *admissionLock) LockCtx(ctx context.Context) error {
	if l.hint == nil {
		l.mu.Lock()
		return nil
	}
	for {
		if l.mu.TryLock() {
			return nil
		}
		l.waiting.Add(1)
		// Again, now that an Unlock will see this waiter: one between
		// the first try and the count would have sent no hint.
		if l.mu.TryLock() {
			l.waiting.Add(-1)
			return nil
		}
		select {
		case <-l.hint:
			l.waiting.Add(-1)
		case <-ctx.Done():
			l.waiting.Add(-1)
			return ctx.Err()
		}
	}
}

// Unlock gives the lock back and wakes a waiter, if any, to try for it.
func (l *admissionLock) Unlock() {
	l.mu.Unlock()
	if l.hint != nil && l.waiting.Load() > 0 {
		select {
		case l.hint <- struct{}{}:
		default: // a hint is already on its way
		}
	}
}
