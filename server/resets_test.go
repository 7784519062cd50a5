package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
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

// Calls that end CANCELLED before their message are early resets when
// their client reset them, not when the body budget cut them: a client
// uploading many large messages at once was closed as a rapid resetter
// (the twelfth hostile pass).
func TestBudgetCutsAreNotEarlyResets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cause    error
		wantHeld bool
	}{
		{"reset by the client", nil, true},
		{"cut by the body budget", errRecvBudget, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &recvConn{}
			var closed atomic.Int64
			r := resetStats{&closed}
			conn := context.WithValue(context.Background(), connResetsKey{}, &connResets{c: c})
			for range 2 * EarlyResetsMin {
				ctx, cancel := context.WithCancelCause(conn)
				cancel(tc.cause) // nil: context.Canceled, as a client's reset
				ctx = r.TagRPC(ctx, &stats.RPCTagInfo{})
				r.HandleRPC(ctx, &stats.End{Error: status.Error(codes.Canceled, "context canceled")})
			}
			if held := c.holdUntil.Load() != 0; held != tc.wantHeld || (closed.Load() == 1) != tc.wantHeld {
				t.Errorf("held %v, closes %d; want held %v", held, closed.Load(), tc.wantHeld)
			}
		})
	}
}
