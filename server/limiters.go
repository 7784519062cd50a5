package server

import "golang.org/x/time/rate"

// keyedLimiters is a rate.Limiter per key (rate r a second after a
// burst of b), at most max of them: past it they all start afresh, each
// with its burst. Not safe for concurrent use: its owner's lock guards
// it. Its zero value with r, b and max set is ready.
type keyedLimiters[K comparable] struct {
	r   rate.Limit
	b   int
	max int
	m   map[K]*rate.Limiter
}

// get is k's limiter.
func (l *keyedLimiters[K]) get(k K) *rate.Limiter {
	if l.m == nil || len(l.m) >= l.max {
		l.m = map[K]*rate.Limiter{}
	}
	x := l.m[k]
	if x == nil {
		x = rate.NewLimiter(l.r, l.b)
		l.m[k] = x
	}
	return x
}

// lookup is k's limiter if it has one (nil: none, as if full).
func (l *keyedLimiters[K]) lookup(k K) *rate.Limiter { return l.m[k] }
