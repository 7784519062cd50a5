package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestArrivalTimerReleasedWhenCallEnds: a call that ends before its
// request arrives (a client's RST_STREAM cancels it) stops its receive
// timer at once, and a call whose request never comes ends with
// DEADLINE_EXCEEDED. Without the release the timer held each reset call
// for the whole receive timeout (hostile pass four: 200,000 rapid resets
// with a token, +430 MB).
func TestArrivalTimerReleasedWhenCallEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		end     func(cancel context.CancelFunc)
		wantErr error
	}{
		{"reset before the request", time.Hour, func(cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"request never arrives", 10 * time.Millisecond, func(context.CancelFunc) {}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx := withArrival(parent, tc.timeout)
			tc.end(cancel)
			<-ctx.Done()
			if err := ctx.Err(); !errors.Is(err, tc.wantErr) {
				t.Errorf("ctx.Err() = %v, want %v", err, tc.wantErr)
			}
			a := ctx.Value(arrivalKey{}).(*arrival)
			select {
			case <-a.released:
			case <-time.After(10 * time.Second):
				t.Fatal("the receive timer was not released when the call ended")
			}
			if a.timer.Stop() {
				t.Error("the receive timer is still armed after the call ended")
			}
		})
	}
}
