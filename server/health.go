package server

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Health is grpc-go's health server whose Shutdown also ends every Watch
// stream (after it has sent NOT_SERVING), so that open health watches do
// not hold GracefulStop until its deadline.
type Health struct {
	*health.Server
	once sync.Once
	stop chan struct{}
}

// NewHealth returns a health server with every status unset.
func NewHealth() *Health { return &Health{Server: health.NewServer(), stop: make(chan struct{})} }

// Shutdown sets every service NOT_SERVING and ends the watches.
func (h *Health) Shutdown() {
	h.Server.Shutdown()
	h.once.Do(func() { close(h.stop) })
}

// Watch implements grpc_health_v1.HealthServer.
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	ws := &watchStream{ServerStreamingServer: stream, ctx: ctx, notServing: make(chan struct{})}
	go func() {
		select {
		case <-h.stop:
			// Let the NOT_SERVING update go out first, briefly.
			select {
			case <-ws.notServing:
			case <-ctx.Done():
			case <-time.After(time.Second): // a client that does not read
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Server.Watch(req, ws)
	select {
	case <-h.stop:
		return status.Error(codes.Unavailable, "server stopping")
	default:
		return err
	}
}

type watchStream struct {
	grpc.ServerStreamingServer[healthpb.HealthCheckResponse]
	ctx        context.Context
	once       sync.Once
	notServing chan struct{}
}

func (w *watchStream) Context() context.Context { return w.ctx }

func (w *watchStream) Send(m *healthpb.HealthCheckResponse) error {
	err := w.ServerStreamingServer.Send(m)
	if m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		w.once.Do(func() { close(w.notServing) })
	}
	return err
}
