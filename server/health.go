package server

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/classifierd/classifierd/internal/peerkey"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Health is grpc-go's health server whose Shutdown also ends every Watch
// stream (after it has sent NOT_SERVING), so that open health watches do
// not hold GracefulStop until its deadline, and whose Watch streams are
// bounded: health needs no token (probes and balancers call it), and the
// ninth hostile pass held 32,000 watches open without one (+496 MB,
// 65,000 goroutines).
type Health struct {
	*health.Server
	once sync.Once
	stop chan struct{}

	// MaxWatches and MaxWatchesPerPeer bound the Watch streams open at
	// once, in all and per peer (peerkey); past them Watch answers
	// RESOURCE_EXHAUSTED.
	MaxWatches, MaxWatchesPerPeer int
	mu                            sync.Mutex
	watches                       int
	perPeer                       map[netip.Addr]int
}

// Bounds of the health watches (Health): a client-side health check
// keeps one per connection.
const (
	DefaultMaxHealthWatches        = 1024
	DefaultMaxHealthWatchesPerPeer = 64
)

// NewHealth returns a health server with every status unset.
func NewHealth() *Health {
	return &Health{Server: health.NewServer(), stop: make(chan struct{}), MaxWatches: DefaultMaxHealthWatches,
		MaxWatchesPerPeer: DefaultMaxHealthWatchesPerPeer, perPeer: map[netip.Addr]int{}}
}

// admitWatch counts a Watch stream of ctx's peer, or refuses it past the
// bounds; release uncounts it.
func (h *Health) admitWatch(ctx context.Context) (release func(), err error) {
	var key netip.Addr
	if p, ok := peer.FromContext(ctx); ok {
		key, _ = peerkey.Remote(p.Addr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watches >= h.MaxWatches {
		return nil, status.Errorf(codes.ResourceExhausted, "%d health watches are open, the most this server keeps: use Check, or retry later", h.watches)
	}
	if h.perPeer[key] >= h.MaxWatchesPerPeer {
		return nil, status.Errorf(codes.ResourceExhausted, "this peer has %d health watches open, the most one peer may: close some, or use Check", h.perPeer[key])
	}
	h.watches++
	h.perPeer[key]++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.watches--
		if h.perPeer[key]--; h.perPeer[key] <= 0 {
			delete(h.perPeer, key)
		}
	}, nil
}

// Shutdown sets every service NOT_SERVING and ends the watches.
func (h *Health) Shutdown() {
	h.Server.Shutdown()
	h.once.Do(func() { close(h.stop) })
}

// Watch implements grpc_health_v1.HealthServer.
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	release, err := h.admitWatch(stream.Context())
	if err != nil {
		return err
	}
	defer release()
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
	err = h.Server.Watch(req, ws)
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
