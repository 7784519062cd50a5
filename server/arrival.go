package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
)

// DefaultRecvTimeout is how long a call's request message may take to
// arrive after its headers unless configured otherwise.
const DefaultRecvTimeout = 10 * time.Second

// DefaultMaxConcurrentStreams is the most calls one gRPC connection may
// have open at once unless configured otherwise: above the 50 a
// connection carries in the load test (400 clients on 8 connections).
const DefaultMaxConcurrentStreams = 64

// errSlowArrival is the cause of a call whose request did not arrive in
// time.
var errSlowArrival = errors.New("request message did not arrive within the receive timeout")

type arrivalKey struct{}

// arrivalCtx is a call's context that ends, as a deadline does, when its
// request message takes longer than the receive timeout to arrive. gRPC
// allocates a message's buffer from the length its 5-byte prefix declares
// and holds it until the rest arrives: without this a caller could hold
// --max-recv-bytes per stream, every stream of every connection, for as
// long as it likes by sending nothing more.
type arrivalCtx struct {
	context.Context
}

// Err reports DeadlineExceeded when the receive timeout ended the call, so
// the client sees DEADLINE_EXCEEDED, not CANCELLED.
func (c arrivalCtx) Err() error {
	if err := c.Context.Err(); err != nil && errors.Is(context.Cause(c.Context), errSlowArrival) {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// arrival is a call's receive timer. released closes once the timer is
// stopped because the call ended.
type arrival struct {
	timer    *time.Timer
	released chan struct{}
	cancel   context.CancelCauseFunc
}

// withArrival returns ctx ending after d unless arrived is called first.
// The timer is stopped as soon as the call ends, whether or not its
// request arrived: a timer left armed holds the call's context (and so
// its stream) for d. The fourth hostile pass reset 200,000 calls with a
// token before their message (HTTP/2 rapid reset, 10 connections, 3 s):
// +430 MB held, to 1.1 GB on a second round.
func withArrival(ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	a := &arrival{released: make(chan struct{}), cancel: cancel}
	a.timer = time.AfterFunc(d, func() { cancel(errSlowArrival) })
	context.AfterFunc(ctx, func() {
		a.timer.Stop()
		close(a.released)
	})
	return arrivalCtx{context.WithValue(ctx, arrivalKey{}, a)}
}

// arrived stops the receive timer of ctx's call: its request is in.
func arrived(ctx context.Context) {
	if a, ok := ctx.Value(arrivalKey{}).(*arrival); ok {
		a.timer.Stop()
	}
}

// errTapRefused is the cause of a call's context a tap refused.
var errTapRefused = errors.New("call refused before it started")

// releaseRefused ends the receive timer and context of every call a tap
// after arrivalTap refuses (next is the whole tap chain). gRPC never ends
// the context of a call its tap refused: its receive timer held it, and
// its stream, for the receive timeout. In the eleventh hostile pass a
// rapid reset with no token on 200 connections had a million calls
// refused by the cap on calls waiting for their message
// (MaxWaitingPerCaller) in ten seconds: RSS 2.2 GB, 167 MB of it the
// arrival timers and contexts of refused calls (heap profile).
func releaseRefused(next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		ctx, err := next(ctx, info)
		if err != nil {
			if a, ok := ctx.Value(arrivalKey{}).(*arrival); ok {
				a.timer.Stop()
				a.cancel(errTapRefused)
			}
		}
		return ctx, err
	}
}

// arrivalTap starts the receive timer of every call, before next (the
// authentication tap, or nil).
func arrivalTap(d time.Duration, next tap.ServerInHandle) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if next != nil {
			var err error
			if ctx, err = next(ctx, info); err != nil {
				return ctx, err
			}
		}
		return withArrival(ctx, d), nil
	}
}

// arrivalInterceptors stop the receive timer once the request is in: a
// unary call's interceptors run after its message was read; a stream's
// first RecvMsg reads it.
func arrivalInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		arrived(ctx)
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &arrivalStream{ServerStream: ss})
	}
	return unary, stream
}

// arrivalStream stops its call's receive timer after the first message.
type arrivalStream struct {
	grpc.ServerStream
	in bool
}

// RecvMsg reads a message and, the first time, stops the receive timer.
func (s *arrivalStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if !s.in {
		s.in = true
		arrived(s.Context())
	}
	return err
}
