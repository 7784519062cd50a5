package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/tap"
)

// TestRefusedCallFreesItsReceiveTimer: a call that a tap after arrivalTap
// refuses (the cap on calls waiting for their message) gets no handler,
// and gRPC never ends its context: its receive timer held it, and its
// stream, for the whole receive timeout. releaseRefused ends both.
func TestRefusedCallFreesItsReceiveTimer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  bool
		release bool
	}{
		{"refused after the timer started: released", true, true},
		{"let in: the timer runs", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := func(ctx context.Context, _ *tap.Info) (context.Context, error) {
				ctx = withArrival(ctx, time.Hour)
				if tc.refuse {
					return ctx, errRecvCalls
				}
				return ctx, nil
			}
			ctx, err := releaseRefused(chain)(context.Background(), &tap.Info{FullMethodName: "/grpc.health.v1.Health/Check"})
			if (err != nil) != tc.refuse {
				t.Fatalf("err %v, refused %v", err, tc.refuse)
			}
			a := ctx.Value(arrivalKey{}).(*arrival)
			select {
			case <-a.released:
				if !tc.release {
					t.Fatal("the receive timer of a call let in was released")
				}
			case <-time.After(2 * time.Second):
				if tc.release {
					t.Fatal("a refused call's receive timer still holds it")
				}
			}
		})
	}
}
