package server

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AdmissionConfig bounds the calls that run the model at once and the
// calls that may wait for one of those places. Calls past both are
// refused at once with ResourceExhausted, so a saturated daemon answers
// in microseconds instead of queueing clients into their deadlines.
type AdmissionConfig struct {
	MaxInFlight int // model calls running at once (0: no admission control)
	MaxQueue    int // calls waiting for a place; more are refused
	// MinDeadline: a call with less time left than this is refused with
	// DeadlineExceeded before any work (it could not finish anyway).
	MinDeadline time.Duration
}

// admittedMethods run the model; the rest (sessions, index info, stats,
// health) are cheap and never wait behind them.
var admittedMethods = map[string]bool{
	"/classifier.v1.ClassifierService/Classify":       true,
	"/classifier.v1.ClassifierService/Route":          true,
	"/classifier.v1.ClassifierService/Embed":          true,
	"/classifier.v1.ClassifierService/AnalyzePrompt":  true,
	"/classifier.v1.ClassifierService/DetectContexts": true,
	"/terminal.v1.TerminalService/DetectInputPrompt":  true,
	"/terminal.v1.TerminalService/InferExpectedInput": true,
}

// Admission is the bounded admission of model calls.
type Admission struct {
	cfg      AdmissionConfig
	slots    chan struct{}
	waiting  atomic.Int64
	inFlight atomic.Int64
	rejected func(method string)
}

// NewAdmission returns the admission control of cfg; nil when
// cfg.MaxInFlight is 0.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.MaxInFlight <= 0 {
		return nil
	}
	return &Admission{cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight), rejected: func(string) {}}
}

// Queued is the number of calls waiting for a place.
func (a *Admission) Queued() int64 { return a.waiting.Load() }

// InFlight is the number of admitted calls running.
func (a *Admission) InFlight() int64 { return a.inFlight.Load() }

// admit takes a place for one call, waiting in the bounded queue if
// needed; the returned func gives it back.
func (a *Admission) admit(ctx context.Context, method string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < a.cfg.MinDeadline {
		return nil, status.Errorf(codes.DeadlineExceeded, "less than %v left of the call's deadline", a.cfg.MinDeadline)
	}
	release := func() { a.inFlight.Add(-1); <-a.slots }
	select {
	case a.slots <- struct{}{}:
		a.inFlight.Add(1)
		return release, nil
	default:
	}
	if a.waiting.Add(1) > int64(a.cfg.MaxQueue) {
		a.waiting.Add(-1)
		a.rejected(method)
		return nil, status.Error(codes.ResourceExhausted, "server overloaded: retry with backoff")
	}
	defer a.waiting.Add(-1)
	select {
	case a.slots <- struct{}{}:
		a.inFlight.Add(1)
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	// Time spent queueing may have used up the deadline: check again
	// before the model runs.
	if err := ctx.Err(); err != nil {
		release()
		return nil, status.FromContextError(err).Err()
	}
	return release, nil
}

func (a *Admission) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if a == nil || !admittedMethods[info.FullMethod] {
			return h(ctx, req)
		}
		release, err := a.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer release()
		return h(ctx, req)
	}
}
