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
	// once, in all and per network (watchNet: an IPv4 /24, an IPv6 /64);
	// the last WatchReserve of MaxWatches go only to networks holding
	// fewer than ReservedWatchesPerPeer. Past them Watch answers
	// RESOURCE_EXHAUSTED.
	MaxWatches, MaxWatchesPerPeer        int
	WatchReserve, ReservedWatchesPerPeer int
	mu                                   sync.Mutex
	watches                              int
	perPeer                              map[netip.Addr]int
}

// Bounds of the health watches (Health): a client-side health check
// keeps one per connection. Counted per address, 16 addresses filled
// the 1,024 (the seventeenth hostile pass: from 127.0.0.2-17, every
// further Watch refused, a real balancer's too). Now a peer is its
// network, an IPv4 /24 or an IPv6 /64 (an address's neighbours are
// mostly one owner's, as a NAT's or a host's are), and the last 256
// places are kept for networks that hold fewer than 4: once 768 are
// open, only such a network opens one. Filling every place so takes 12
// networks of 64 and 64 more of 4 (76 /24s or /64s, where 16 addresses
// did), and until then a network that holds none, a balancer's, opens
// up to 4. A finite cap can still be filled by a client with enough
// networks (on loopback, 127/8 has 65,536 /24s); ending the watches of
// the largest holder for a newcomer would be next. An honest fleet of
// balancers behind one /24 shares 64 watches (one per connection).
const (
	DefaultMaxHealthWatches        = 1024
	DefaultMaxHealthWatchesPerPeer = 64
	DefaultHealthWatchReserve      = DefaultMaxHealthWatches / 4
	DefaultReservedWatchesPerPeer  = 4
)

// NewHealth returns a health server with every status unset.
func NewHealth() *Health {
	return &Health{Server: health.NewServer(), stop: make(chan struct{}), MaxWatches: DefaultMaxHealthWatches,
		MaxWatchesPerPeer: DefaultMaxHealthWatchesPerPeer, WatchReserve: DefaultHealthWatchReserve,
		ReservedWatchesPerPeer: DefaultReservedWatchesPerPeer, perPeer: map[netip.Addr]int{}}
}

// watchNet is the network whose watches are counted together: an IPv4
// address's /24 (a loopback one's too), an IPv6 address's /64
// (peerkey.Of); the zero address (a Unix socket) is one.
func watchNet(a netip.Addr) netip.Addr {
	if a.Is4() {
		p, _ := a.Prefix(24)
		return p.Addr()
	}
	return a
}

// admitWatch counts a Watch stream of ctx's peer, or refuses it past the
// bounds; release uncounts it.
func (h *Health) admitWatch(ctx context.Context) (release func(), err error) {
	var key netip.Addr
	if p, ok := peer.FromContext(ctx); ok {
		key, _ = peerkey.Remote(p.Addr)
		key = watchNet(key)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	held := h.perPeer[key]
	if h.watches >= h.MaxWatches {
		return nil, status.Errorf(codes.ResourceExhausted, "%d health watches are open, the most this server keeps: use Check, or retry later", h.watches)
	}
	if h.watches >= h.MaxWatches-h.WatchReserve && held >= h.ReservedWatchesPerPeer {
		return nil, status.Errorf(codes.ResourceExhausted, "%d health watches are open, and this network holds %d: the last %d are kept for networks holding fewer than %d; use Check, or retry later",
			h.watches, held, h.WatchReserve, h.ReservedWatchesPerPeer)
	}
	if held >= h.MaxWatchesPerPeer {
		return nil, status.Errorf(codes.ResourceExhausted, "this network (%s) has %d health watches open, the most one may: close some, or use Check", key, held)
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
