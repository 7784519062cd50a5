package server

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// TestHealthWatchesBounded: health needs no token, so its Watch streams
// are bounded per peer and in all (the ninth hostile pass held 32,000
// open: +496 MB, 65,000 goroutines). Over a real socket: the peer's
// fourth watch is refused RESOURCE_EXHAUSTED, and one closed frees its
// place; Check is never refused.
func TestHealthWatchesBounded(t *testing.T) {
	h := NewHealth()
	h.MaxWatchesPerPeer, h.MaxWatches = 3, 100
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, h)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// watch opens a Watch and returns the code of its first answer.
	watch := func(ctx context.Context) codes.Code {
		st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return status.Code(err)
		}
		_, err = st.Recv()
		return status.Code(err)
	}
	var cancels []context.CancelFunc
	for i := 0; i < 3; i++ {
		wctx, wcancel := context.WithCancel(ctx)
		cancels = append(cancels, wcancel)
		if c := watch(wctx); c != codes.OK {
			t.Fatalf("watch %d: %v, want OK", i, c)
		}
	}
	if c := watch(ctx); c != codes.ResourceExhausted {
		t.Fatalf("the peer's fourth watch: %v, want RESOURCE_EXHAUSTED", c)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check beside the watches: %v", err)
	}
	cancels[0]()
	// The server sees the cancel a moment later.
	for deadline := time.Now().Add(10 * time.Second); ; {
		wctx, wcancel := context.WithCancel(ctx)
		c := watch(wctx)
		if c == codes.OK {
			wcancel()
			break
		}
		wcancel()
		if c != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("a watch after one closed: %v, want OK", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range cancels[1:] {
		c()
	}

	// In all: past MaxWatches, whatever the peer holds.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h.mu.Lock()
		n := h.watches
		if n == 0 {
			h.MaxWatches = 1
		}
		h.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches still counted after every one closed", n)
		}
	}
	if c := watch(ctx); c != codes.OK {
		t.Fatalf("the one watch MaxWatches allows: %v, want OK", c)
	}
	if c := watch(ctx); c != codes.ResourceExhausted {
		t.Fatalf("a watch past MaxWatches: %v, want RESOURCE_EXHAUSTED", c)
	}
}

// TestHealthWatchesPerNetworkAndReserve: 16 addresses filled the 1,024
// health watches, 64 each, and every further Watch was refused, a real
// balancer's too (the seventeenth hostile pass, from 127.0.0.2-17). Now
// an IPv4 /24 (an IPv6 /64) holds 64 at most, and the last
// DefaultHealthWatchReserve places go only to networks holding fewer
// than DefaultReservedWatchesPerPeer: a network that holds none opens
// some until 76 networks hold every place.
func TestHealthWatchesPerNetworkAndReserve(t *testing.T) {
	h := NewHealth()
	var releases []func()
	t.Cleanup(func() {
		for _, r := range releases {
			r()
		}
	})
	open := func(addr string) bool {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 40000}})
		r, err := h.admitWatch(ctx)
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", addr, err)
			}
			return false
		}
		releases = append(releases, r)
		return true
	}
	// 16 addresses of one /24, as many as each may.
	opened := 0
	for i := 2; i < 18; i++ {
		for range DefaultMaxHealthWatchesPerPeer + 1 {
			if open(fmt.Sprintf("127.0.0.%d", i)) {
				opened++
			}
		}
	}
	if opened != DefaultMaxHealthWatchesPerPeer {
		t.Fatalf("16 addresses of a /24 opened %d watches, want the network's %d", opened, DefaultMaxHealthWatchesPerPeer)
	}
	// IPv6: a /64 is one network.
	for i := range DefaultMaxHealthWatchesPerPeer + 1 {
		if ok := open(fmt.Sprintf("2001:db8:1:2::%x", i+1)); ok != (i < DefaultMaxHealthWatchesPerPeer) {
			t.Fatalf("watch %d of a /64: opened %v", i+1, ok)
		}
	}
	// Other networks fill the places outside the reserve...
	nets := 2
	for n := 0; h.watches < DefaultMaxHealthWatches-DefaultHealthWatchReserve; n++ {
		nets++
		for range DefaultMaxHealthWatchesPerPeer {
			open(fmt.Sprintf("10.0.%d.1", n))
		}
	}
	// ...and a network holding some is refused one more, while a
	// balancer's network, holding none, opens a few.
	if open("127.0.0.99") || open("10.0.0.1") {
		t.Fatalf("a network holding %d opened a watch of the reserve", DefaultMaxHealthWatchesPerPeer)
	}
	for i := range DefaultReservedWatchesPerPeer + 1 {
		if ok := open("198.51.100.7"); ok != (i < DefaultReservedWatchesPerPeer) {
			t.Fatalf("a new network's watch %d with %d open: opened %v, want %v", i+1, h.watches, ok, i < DefaultReservedWatchesPerPeer)
		}
	}
	nets++
	// Filling the reserve takes a network for each few places.
	for n := 0; h.watches < DefaultMaxHealthWatches; n++ {
		nets++
		for range DefaultReservedWatchesPerPeer + 1 {
			open(fmt.Sprintf("10.1.%d.1", n))
		}
	}
	if want := (DefaultMaxHealthWatches-DefaultHealthWatchReserve)/DefaultMaxHealthWatchesPerPeer + DefaultHealthWatchReserve/DefaultReservedWatchesPerPeer; nets < want {
		t.Fatalf("%d networks filled the %d watches, want %d at least", nets, DefaultMaxHealthWatches, want)
	}
	if open("203.0.113.1") {
		t.Fatal("a watch past MaxWatches opened")
	}
}
