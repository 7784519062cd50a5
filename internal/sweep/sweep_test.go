package sweep

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{0, time.Second},
		{time.Second, time.Second},
		{8 * time.Second, 2 * time.Second},
		{time.Hour, time.Minute},
	} {
		if got := Interval(tc.ttl); got != tc.want {
			t.Errorf("Interval(%v) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

// TestEvery runs the loop for real: fn is called on every tick, its errors
// reach report, and Every returns once ctx is done, with no call after.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	boom := errors.New("boom")
	var calls atomic.Int32
	reported := make(chan error, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func(context.Context) error {
			if calls.Add(1) == 3 {
				cancel()
			}
			return boom
		}, func(err error) { reported <- err })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	// A tick already due when ctx ends may still run (select picks at
	// random), but none runs after Every has returned.
	n := calls.Load()
	time.Sleep(5 * time.Millisecond)
	if got := calls.Load(); got < 3 || got != n {
		t.Errorf("fn called %d times, then %d after Every returned; want at least 3, then no more", n, got)
	}
	// The third call's error came with the context cancelled: not
	// reported, nor any later one.
	if got := len(reported); got != 2 {
		t.Errorf("%d errors reported, want 2", got)
	}
	for range len(reported) {
		if err := <-reported; !errors.Is(err, boom) {
			t.Errorf("reported %v, want %v", err, boom)
		}
	}
}

func TestReport(t *testing.T) {
	live := context.Background()
	dead, cancel := context.WithCancel(live)
	cancel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"an error", live, boom, 1},
		{"no error", live, nil, 0},
		{"the context ended", dead, boom, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			Report(tc.ctx, tc.err, func(error) { n++ })
			Report(tc.ctx, tc.err, nil) // a nil report is allowed
			if n != tc.want {
				t.Errorf("reported %d times, want %d", n, tc.want)
			}
		})
	}
}
